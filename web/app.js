// The chat page: conversations (store.js), streamed replies (api.js), safe Markdown
// (markdown.js), K3's reasoning stream and tool calls, per-reply figures and the server's
// live state.
import { ApiError, chat, metrics, models, setApiKey } from './api.js';
import { renderMarkdown } from './markdown.js';
import { DEFAULT_SETTINGS, create, exportUrl, loadAll, remove, saveAll } from './store.js';

const $ = (id) => document.getElementById(id);
const SETTINGS = ['system', 'temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'seed', 'thinking', 'effort', 'schema', 'tools'];

let list = loadAll();
let current = list[0] || create(list);
let controller = null;   // the reply being streamed
let attached = [];       // data: URLs of the images for the next message

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function showError(message) {
  const box = $('error');
  box.textContent = message;
  box.hidden = !message;
}

function copyButton(getText) {
  const b = el('button', 'copy', 'Copy');
  b.type = 'button';
  b.addEventListener('click', () => navigator.clipboard.writeText(getText()).catch(() => {}));
  return b;
}

// ---------------------------------------------------------------- conversations
function renderList() {
  const ul = $('conversations');
  ul.replaceChildren();
  for (const c of list) {
    const li = el('li', c.id === current.id ? 'active' : '');
    const name = el('button', 'title', c.title);
    name.type = 'button';
    name.addEventListener('click', () => switchTo(c));
    const rename = el('button', 'small', 'Rename');
    rename.type = 'button';
    rename.addEventListener('click', () => {
      const t = prompt('Name of this conversation', c.title);
      if (t) { c.title = t; saveAll(list); renderList(); }
    });
    const exp = el('a', 'small', 'Export');
    exp.download = `${c.title.replace(/[^\w.-]+/g, '_')}.json`;
    exp.addEventListener('click', () => { exp.href = exportUrl(c); });
    const del = el('button', 'small', 'Delete');
    del.type = 'button';
    del.addEventListener('click', () => {
      remove(list, c.id);
      if (c.id === current.id) current = list[0] || create(list);
      renderList();
      renderMessages();
      loadSettings();
    });
    li.append(name, rename, exp, del);
    ul.append(li);
  }
}

function switchTo(c) {
  if (controller) controller.abort();
  current = c;
  renderList();
  renderMessages();
  loadSettings();
}

function loadSettings() {
  const s = { ...DEFAULT_SETTINGS, ...current.settings };
  for (const k of SETTINGS) {
    const input = $(k);
    if (input.type === 'checkbox') input.checked = Boolean(s[k]);
    else input.value = s[k];
  }
}

function saveSettings() {
  const s = {};
  for (const k of SETTINGS) {
    const input = $(k);
    s[k] = input.type === 'checkbox' ? input.checked : input.value;
  }
  current.settings = s;
  saveAll(list);
}

// ---------------------------------------------------------------- messages
function figuresText(f) {
  if (!f) return '';
  const parts = [`${f.prompt_tokens} prompt tokens`];
  if (f.cached_tokens) parts.push(`${f.cached_tokens} cached`);
  if (f.ttft_ms !== undefined) parts.push(`TTFT ${f.ttft_ms.toFixed(0)} ms`);
  if (f.decode_tps) parts.push(`${f.decode_tps.toFixed(1)} tok/s`);
  parts.push(`${f.completion_tokens} tokens`);
  return parts.join(' · ');
}

function messageView(m, index) {
  const box = el('article', `message ${m.role}`);
  if (m.role === 'user') {
    const parts = Array.isArray(m.content) ? m.content : [{ type: 'text', text: m.content }];
    for (const p of parts) {
      if (p.type === 'image_url') {
        const img = el('img', 'thumb');
        img.src = p.image_url.url;   // a data: URL the user attached
        img.alt = 'attached image';
        box.append(img);
      } else {
        box.append(el('div', 'text', p.text));
      }
    }
    const edit = el('button', 'small', 'Edit');
    edit.type = 'button';
    edit.addEventListener('click', () => {
      $('input').value = parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
      attached = parts.filter((p) => p.type === 'image_url').map((p) => p.image_url.url);
      renderAttachments();
      current.messages.splice(index);
      saveAll(list);
      renderMessages();
      $('input').focus();
    });
    box.append(edit, copyButton(() => parts.filter((p) => p.type === 'text').map((p) => p.text).join('')));
    return box;
  }
  if (m.role === 'tool') {
    box.append(el('div', 'label', `tool result (${m.tool_call_id || ''})`), el('pre', 'text', m.content));
    return box;
  }
  if (m.reasoning_content) {
    const think = el('details', 'reasoning');
    think.open = !m.content && m.streaming;
    think.append(el('summary', '', 'Reasoning'), el('div', 'text', m.reasoning_content));
    box.append(think);
  }
  const body = el('div', 'markdown');
  body.append(renderMarkdown(m.content || ''));
  for (const pre of body.querySelectorAll('pre')) pre.append(copyButton(() => pre.textContent));
  box.append(body);
  for (const call of m.tool_calls || []) {
    const card = el('div', 'tool-call');
    card.append(el('div', 'label', `tool call: ${call.function.name}`), el('pre', '', call.function.arguments));
    const reply = el('button', 'small', 'Add tool result');
    reply.type = 'button';
    reply.addEventListener('click', () => {
      const result = prompt(`Result of ${call.function.name}`);
      if (result === null) return;
      current.messages.push({ role: 'tool', tool_call_id: call.id, content: result });
      saveAll(list);
      send();
    });
    card.append(reply);
    box.append(card);
  }
  const tools = el('div', 'tools');
  tools.append(el('span', 'figures', figuresText(m.figures)), copyButton(() => m.content || ''));
  if (index === current.messages.length - 1 && !m.streaming) {
    const again = el('button', 'small', 'Regenerate');
    again.type = 'button';
    again.addEventListener('click', () => {
      current.messages.pop();
      send();
    });
    tools.append(again);
  }
  box.append(tools);
  return box;
}

function renderMessages() {
  const box = $('messages');
  box.replaceChildren(...current.messages.map(messageView));
  box.scrollTop = box.scrollHeight;
}

// ---------------------------------------------------------------- sending
function requestBody() {
  const s = { ...DEFAULT_SETTINGS, ...current.settings };
  const messages = [];
  if (s.system.trim()) messages.push({ role: 'system', content: s.system });
  for (const m of current.messages) {
    const out = { role: m.role, content: m.content ?? '' };
    if (m.reasoning_content) out.reasoning_content = m.reasoning_content;
    if (m.tool_calls) out.tool_calls = m.tool_calls;
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    messages.push(out);
  }
  const body = {
    messages,
    temperature: Number(s.temperature), top_p: Number(s.top_p), top_k: Number(s.top_k), min_p: Number(s.min_p),
    max_tokens: Number(s.max_tokens),
    chat_template_kwargs: { thinking: Boolean(s.thinking), thinking_effort: s.effort },
  };
  if (s.seed !== '') body.seed = Number(s.seed);
  if (s.schema.trim()) {
    let schema;
    try {
      schema = JSON.parse(s.schema);
    } catch (e) {
      throw new Error(`The JSON schema is not valid JSON: ${e.message}`);
    }
    body.response_format = { type: 'json_schema', json_schema: { name: 'page', schema } };
  }
  if ((s.tools || '').trim()) {
    let tools;
    try {
      tools = JSON.parse(s.tools);
    } catch (e) {
      throw new Error(`The tools are not valid JSON: ${e.message}`);
    }
    if (!Array.isArray(tools)) throw new Error('The tools must be a JSON array of function declarations');
    body.tools = tools;
  }
  return body;
}

async function send() {
  showError('');
  let body;
  try {
    body = requestBody();
  } catch (e) {
    showError(e.message);
    return;
  }
  const reply = { role: 'assistant', content: '', reasoning_content: '', streaming: true };
  current.messages.push(reply);
  if (current.title === 'New chat') {
    const first = current.messages.find((m) => m.role === 'user');
    const text = first && (Array.isArray(first.content) ? first.content.find((p) => p.type === 'text') : { text: first.content });
    if (text && text.text) current.title = text.text.slice(0, 40);
  }
  renderList();
  renderMessages();
  controller = new AbortController();
  $('send').hidden = true;
  $('stop').hidden = false;
  const t0 = performance.now();
  let first = 0, last = 0, usage = null;
  try {
    for await (const chunk of chat(body, controller.signal)) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        const d = choice.delta || {};
        if (d.content || d.reasoning_content) {
          last = performance.now();
          if (!first) first = last;
        }
        if (d.reasoning_content) reply.reasoning_content += d.reasoning_content;
        if (d.content) reply.content += d.content;
        if (d.tool_calls) {
          reply.tool_calls = reply.tool_calls || [];
          for (const c of d.tool_calls) reply.tool_calls[c.index] = { id: c.id, type: 'function', function: c.function };
        }
      }
      renderMessages();
    }
  } catch (e) {
    if (e.name !== 'AbortError') {
      if (e instanceof ApiError && e.status === 401) {
        const key = prompt('This server needs an API key');
        if (key) setApiKey(key);
      }
      showError(e instanceof ApiError ? `The server answered ${e.status}: ${e.message}` : String(e.message || e));
    }
  } finally {
    delete reply.streaming;
    if (!reply.reasoning_content) delete reply.reasoning_content;
    if (usage) {
      const n = usage.completion_tokens;
      reply.figures = {
        prompt_tokens: usage.prompt_tokens,
        cached_tokens: usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0,
        completion_tokens: n,
        ttft_ms: first ? first - t0 : undefined,
        decode_tps: n > 1 && last > first ? ((n - 1) * 1000) / (last - first) : 0,
      };
    }
    current.updated = Date.now();
    saveAll(list);
    controller = null;
    $('send').hidden = false;
    $('stop').hidden = true;
    renderMessages();
  }
}

// ---------------------------------------------------------------- the server's state
async function refreshHeader() {
  try {
    const [card] = await models();
    $('model-name').textContent = card.id;
    $('model-ctx').textContent = card.max_model_len ? `${card.max_model_len} tokens of context` : '';
  } catch (e) {
    $('model-name').textContent = e instanceof ApiError && e.status === 401 ? 'API key needed' : 'server not ready';
  }
}

async function refreshState() {
  try {
    const m = await metrics();
    const usage = m['kimi:kv_cache_usage_perc'];
    $('server-state').textContent = `${m['kimi:num_requests_running'] ?? 0} running · ` +
      `${m['kimi:num_requests_waiting'] ?? 0} waiting · cache ${usage === undefined ? '–' : (usage * 100).toFixed(0)} %`;
  } catch {
    $('server-state').textContent = 'server unreachable';
  }
}

// ---------------------------------------------------------------- images
function renderAttachments() {
  const box = $('attachments');
  box.replaceChildren(...attached.map((url, i) => {
    const img = el('img', 'thumb');
    img.src = url;
    img.alt = 'image to send';
    img.title = 'Click to remove';
    img.addEventListener('click', () => { attached.splice(i, 1); renderAttachments(); });
    return img;
  }));
}

function attachFiles(files) {
  for (const f of files) {
    if (!f.type.startsWith('image/')) continue;
    const reader = new FileReader();
    reader.addEventListener('load', () => { attached.push(reader.result); renderAttachments(); });
    reader.readAsDataURL(f);
  }
}

// ---------------------------------------------------------------- wiring
$('composer').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = $('input').value;
  if ((!text.trim() && !attached.length) || controller) return;
  const content = attached.length
    ? [...attached.map((url) => ({ type: 'image_url', image_url: { url } })), { type: 'text', text }]
    : text;
  current.messages.push({ role: 'user', content });
  $('input').value = '';
  attached = [];
  renderAttachments();
  send();
});
$('attach').addEventListener('change', (ev) => { attachFiles(ev.target.files); ev.target.value = ''; });
$('input').addEventListener('paste', (ev) => attachFiles([...ev.clipboardData.items].map((i) => i.getAsFile()).filter(Boolean)));
document.addEventListener('dragover', (ev) => ev.preventDefault());
document.addEventListener('drop', (ev) => {
  ev.preventDefault();
  attachFiles(ev.dataTransfer.files);
});
$('input').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
});
document.addEventListener('keydown', (ev) => {
  if (ev.key === 'Escape' && controller) controller.abort();
});
$('stop').addEventListener('click', () => controller && controller.abort());
$('new-chat').addEventListener('click', () => switchTo(create(list)));
$('toggle-settings').addEventListener('click', () => {
  const s = $('settings');
  s.hidden = !s.hidden;
  $('toggle-settings').setAttribute('aria-expanded', String(!s.hidden));
});
for (const k of SETTINGS) $(k).addEventListener('change', saveSettings);
// A ready-made declaration: a calculator of integer expressions (the default model, kimi-k3-mini,
// was trained to call it for multiplications; its result is typed in with "Add tool result").
const CALCULATOR = [{
  type: 'function',
  function: {
    name: 'calculator',
    description: 'Evaluates an arithmetic expression with integers and + - * and returns the result.',
    parameters: {
      type: 'object',
      properties: { expression: { type: 'string', description: 'for example 12 * 7' } },
      required: ['expression'],
    },
  },
}];
$('add-calculator').addEventListener('click', () => {
  $('tools').value = JSON.stringify(CALCULATOR, null, 1);
  saveSettings();
});

renderList();
renderMessages();
loadSettings();
refreshHeader();
refreshState();
setInterval(refreshState, 5000);
