// Conversations kept in the browser's localStorage: each with its messages (as the API takes
// them, plus the figures of each reply) and its own settings.
const KEY = 'kimi-conversations';

export const DEFAULT_SETTINGS = {
  system: '', temperature: 0.7, top_p: 1, top_k: -1, min_p: 0, max_tokens: 512, seed: '',
  thinking: true, effort: 'max', schema: '', tools: '',
};

export function loadAll() {
  try {
    const list = JSON.parse(localStorage.getItem(KEY) || '[]');
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

export function saveAll(list) {
  localStorage.setItem(KEY, JSON.stringify(list));
}

export function create(list) {
  const c = { id: crypto.randomUUID(), title: 'New chat', messages: [], settings: { ...DEFAULT_SETTINGS }, updated: Date.now() };
  list.unshift(c);
  saveAll(list);
  return c;
}

export function remove(list, id) {
  const i = list.findIndex((c) => c.id === id);
  if (i >= 0) list.splice(i, 1);
  saveAll(list);
}

// A conversation as a JSON file the user downloads.
export function exportUrl(conversation) {
  const blob = new Blob([JSON.stringify(conversation, null, 2)], { type: 'application/json' });
  return URL.createObjectURL(blob);
}
