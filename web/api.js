// The server's API as the page uses it: chat completions streamed over SSE, the model card,
// the Prometheus metrics. The API key (when the server wants one) lives in sessionStorage
// only — never in a URL, never logged.
const KEY = 'kimi-api-key';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
  static async from(response) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body && body.error && body.error.message) message = body.error.message;
    } catch { /* not JSON: keep the status line */ }
    return new ApiError(response.status, message);
  }
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = sessionStorage.getItem(KEY);
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

export async function models() {
  const r = await fetch('/v1/models', { headers: headers() });
  if (!r.ok) throw await ApiError.from(r);
  return (await r.json()).data;
}

// {name: value} of the unlabelled samples of the Prometheus text.
export async function metrics() {
  const r = await fetch('/metrics');
  if (!r.ok) throw await ApiError.from(r);
  const out = {};
  for (const line of (await r.text()).split('\n')) {
    const m = /^([a-z_:]+) ([-0-9.e+]+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

// Streams one chat completion: yields each SSE chunk (parsed JSON) until [DONE].
export async function* chat(body, signal) {
  const r = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  if (!r.ok) throw await ApiError.from(r);
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(chunk.error.code === 'out_of_memory' ? 503 : 500, chunk.error.message);
        yield chunk;
      }
    }
  }
}
