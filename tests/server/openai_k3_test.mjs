// End-to-end test of a Kimi-K3 model behind `kimi-cpp serve`, driven by the stock `openai` npm
// client: the XTML chat format (tools, chat_template_kwargs, reasoning_effort, tool-call
// history with JSON-string arguments, tool results), replies parsed into reasoning_content /
// content / tool_calls — streamed deltas reassemble to the non-streamed message, never a tag
// in the text — and bad inputs as 400 JSON errors.
//
//   node tests/server/openai_k3_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
import fs from 'node:fs';
import { MODEL_NAME, cliArgs, fmt, assert, eq, check, report, runMain, makeTinyModel, startServer, checkShutdown, importOpenAI } from './common.mjs';

const args = cliArgs('usage: openai_k3_test.mjs --kimi PATH --node-modules DIR', ['kimi', 'node-modules']);
const KIMI = args.kimi;
const NODE_MODULES = args['node-modules'];

const TOOLS = [{
    type: 'function',
    function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
}];
const HISTORY = [
    { role: 'system', content: 'You are Kimi.' },
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', reasoning_content: 'Use the tool.',
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21 °C' },
    { role: 'user', content: 'And tomorrow?' },
];

async function main() {
    const mod = await importOpenAI(NODE_MODULES);
    const OpenAI = mod.default;
    const { BadRequestError } = mod;
    const { tmp, modelDir } = makeTinyModel(KIMI, 'kimi-openai-k3-', 'k3-tiny');
    const t0 = Date.now();
    let srv = null;
    try {
        srv = await startServer(KIMI, modelDir, ['--threads', '2']);
        const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'x', maxRetries: 0, timeout: 60000 });
        const base = { model: MODEL_NAME, messages: HISTORY, tools: TOOLS, max_tokens: 24, temperature: 0, ignore_eos: true };

        await check('startup names the K3 chat format', async () => {
            assert(/chat format kimi-k3/.test(srv.stderr), `stderr: ${fmt(srv.stderr.slice(-800))}`);
        });
        for (const [label, extra] of [
            ['thinking on, effort low', { chat_template_kwargs: { thinking: true, thinking_effort: 'low' } }],
            ['thinking off', { chat_template_kwargs: { thinking: false } }],
            ['reasoning_effort high', { reasoning_effort: 'high' }],
        ]) {
            await check(`chat with tools and history (${label}): stream reassembles to the message`, async () => {
                const r = await client.chat.completions.create({ ...base, ...extra });
                const msg = r.choices[0].message;
                assert('reasoning_content' in msg, `no reasoning_content key: ${fmt(msg)}`);
                eq(r.usage.completion_tokens, 24, 'completion_tokens');
                assert(['length', 'stop', 'tool_calls'].includes(r.choices[0].finish_reason), `finish ${r.choices[0].finish_reason}`);
                if (extra.chat_template_kwargs && extra.chat_template_kwargs.thinking === false) eq(msg.reasoning_content, null, 'no reasoning when thinking is off');
                const chunks = [];
                for await (const c of await client.chat.completions.create({ ...base, ...extra, stream: true })) chunks.push(c);
                eq(msg.reasoning, msg.reasoning_content, 'reasoning (vLLM\'s newer name) beside reasoning_content');
                let content = '', reasoning = '', reasoning2 = '', calls = [];
                for (const c of chunks) for (const ch of c.choices) {
                    if (typeof ch.delta.content === 'string') content += ch.delta.content;
                    if (typeof ch.delta.reasoning_content === 'string') reasoning += ch.delta.reasoning_content;
                    if (typeof ch.delta.reasoning === 'string') reasoning2 += ch.delta.reasoning;
                    if (ch.delta.tool_calls) calls.push(...ch.delta.tool_calls);
                }
                eq(content, msg.content ?? '', 'streamed content');
                eq(reasoning, msg.reasoning_content ?? '', 'streamed reasoning');
                eq(reasoning2, reasoning, 'streamed reasoning under both names');
                eq(calls.length, (msg.tool_calls || []).length, 'streamed tool calls');
                for (const s of [content, reasoning]) assert(!s.includes('<|open|>') && !s.includes('<|close|>') && !s.includes('<|sep|>'), `a tag in the text: ${fmt(s)}`);
            });
        }
        await check('/tokenize of the messages == prompt_tokens of the chat', async () => {
            const r = await client.chat.completions.create({ ...base, max_tokens: 1 });
            const t = await fetch(srv.url + '/tokenize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                          body: JSON.stringify({ model: MODEL_NAME, messages: HISTORY, tools: TOOLS }) });
            eq((await t.json()).count, r.usage.prompt_tokens, 'prompt tokens');
        });
        const bad = async (what, params, param) => {
            let err = null;
            try { await client.chat.completions.create({ ...base, ...params }); } catch (e) { err = e; }
            assert(err instanceof BadRequestError, `${what}: ${err && err.constructor.name} ${err && err.message}`);
            eq(err.status, 400, `${what}: status`);
            if (param) eq(err.param, param, `${what}: param`);
        };
        await check('bad inputs → 400 JSON naming the field', async () => {
            await bad('unknown thinking effort', { chat_template_kwargs: { thinking_effort: 'medium' } }, 'chat_template_kwargs');
            await bad('chat_template_kwargs not an object', { chat_template_kwargs: 3 }, 'chat_template_kwargs');
            await bad('an image part', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] }, 'messages');
            await bad('a tool result with no resolvable name', { messages: [{ role: 'user', content: 'x' }, { role: 'tool', content: 'y' }] }, 'messages');
            await bad('tool-call arguments neither object nor string', {
                messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: '', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: 7 } }] }],
            }, 'messages');
            const r = await client.chat.completions.create({ ...base, max_tokens: 2 });   // still serving
            eq(r.choices.length, 1, 'served after the errors');
        });
    } finally {
        if (srv) await checkShutdown('server', srv);
        fs.rmSync(tmp, { recursive: true, force: true });
    }
    return report(t0);
}

runMain(main);
