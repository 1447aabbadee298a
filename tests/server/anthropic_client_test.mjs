// End-to-end test of the Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens)
// behind `kimi-cpp serve`, driven by the stock `@anthropic-ai/sdk` client, on both chat formats
// (a Kimi Linear and a Kimi-K3 tiny model): plain and streamed replies (the stream's events in
// Anthropic's order, reassembling to the plain reply), a full tool round trip, thinking on and
// off (K3), stop sequences, images (K3), count_tokens equal to the chat template's own render of
// the same conversation (`kimi-cpp chat-template --request`), auth by x-api-key and by Bearer,
// and errors in Anthropic's shape.
//
//   node tests/server/anthropic_client_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { MODEL_NAME, cliArgs, fmt, assert, eq, check, report, runMain, makeTinyModel, startServer, checkShutdown, importAnthropic, png } from './common.mjs';

const args = cliArgs('usage: anthropic_client_test.mjs --kimi PATH --node-modules DIR', ['kimi', 'node-modules']);
const KIMI = args.kimi;
const KEY = 'test-key-anthropic';

const WEATHER = {
    name: 'get_weather',
    description: 'Weather of a city',
    input_schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false },
};

// The prompt's token ids as `kimi-cpp chat-template --request` renders an OpenAI chat body.
function templateIds(tmp, modelDir, body) {
    const file = path.join(tmp, 'request.json');
    fs.writeFileSync(file, JSON.stringify(body));
    const out = execFileSync(KIMI, ['chat-template', '--tokenizer', modelDir, '--request', file, '--json'], { encoding: 'utf8' });
    return JSON.parse(out).ids;
}

// The raw events of a streamed call, checked against Anthropic's grammar: message_start first,
// message_stop last, blocks opened / delta'd / closed in index order; returns the events and the
// message they assemble to.
async function rawStream(client, params) {
    const events = [];
    for await (const ev of await client.messages.create({ ...params, stream: true })) events.push(ev);
    eq(events[0].type, 'message_start', 'first event');
    eq(events.at(-1).type, 'message_stop', 'last event');
    eq(events.at(-2).type, 'message_delta', 'message_delta before message_stop');
    // message_start goes out once the cached tokens are known: its usage is message_delta's
    const startUsage = events[0].message.usage, endUsage = events.at(-2).usage;
    eq(startUsage.input_tokens, endUsage.input_tokens, 'message_start and message_delta: input_tokens');
    eq(startUsage.cache_read_input_tokens, endUsage.cache_read_input_tokens,
       'message_start and message_delta: cache_read_input_tokens');
    const blocks = [];
    let open = -1;
    for (const ev of events.slice(1, -2)) {
        if (ev.type === 'ping') continue;
        if (ev.type === 'content_block_start') {
            eq(open, -1, 'a block starts while none is open');
            eq(ev.index, blocks.length, 'block index');
            blocks.push(structuredClone(ev.content_block));
            open = ev.index;
            if (ev.content_block.type === 'tool_use') blocks.at(-1).json = '';
        } else if (ev.type === 'content_block_delta') {
            eq(ev.index, open, 'delta of the open block');
            const b = blocks[open], d = ev.delta;
            if (d.type === 'text_delta') b.text += d.text;
            else if (d.type === 'thinking_delta') b.thinking += d.thinking;
            else if (d.type === 'input_json_delta') b.json += d.partial_json;
            else throw new Error(`unexpected delta ${fmt(d)}`);
        } else if (ev.type === 'content_block_stop') {
            eq(ev.index, open, 'stop of the open block');
            open = -1;
        } else {
            throw new Error(`unexpected event ${fmt(ev)}`);
        }
    }
    eq(open, -1, 'every block closed');
    for (const b of blocks) if (b.type === 'tool_use') { b.input = JSON.parse(b.json); delete b.json; }
    const last = events.at(-2);
    return { events, content: blocks, stop_reason: last.delta.stop_reason, stop_sequence: last.delta.stop_sequence, usage: last.usage };
}

async function formatChecks(Anthropic, errors, label, preset, tmp) {
    const modelDir = path.join(tmp, preset);
    execFileSync(KIMI, ['make-model', '--preset', preset, '--seed', '1', '--out', modelDir, '--quiet'], { stdio: 'pipe' });
    const k3 = preset.startsWith('k3');
    const srv = await startServer(KIMI, modelDir, ['--threads', '2', '--api-key', KEY]);
    try {
        const client = new Anthropic({ baseURL: srv.url, apiKey: KEY, maxRetries: 0, timeout: 120000 });
        const noThink = k3 ? { thinking: { type: 'disabled' } } : {};
        const base = { model: MODEL_NAME, max_tokens: 12, temperature: 0, ignore_eos: true, system: 'You are Kimi.',
                       messages: [{ role: 'user', content: 'Say hello.' }] };

        await check(`${label}: a plain reply: content blocks, stop_reason, usage`, async () => {
            const m = await client.messages.create({ ...base, ...noThink });
            eq(m.type, 'message', 'type');
            eq(m.role, 'assistant', 'role');
            eq(m.model, MODEL_NAME, 'model');
            assert(/^msg_/.test(m.id), `id ${m.id}`);
            eq(m.stop_reason, 'max_tokens', 'stop_reason');
            eq(m.stop_sequence, null, 'stop_sequence');
            eq(m.usage.output_tokens, 12, 'output_tokens');
            eq(m.content.map((b) => b.type), ['text'], 'one text block');
            const count = await client.messages.countTokens({ model: MODEL_NAME, system: base.system, messages: base.messages, ...noThink });
            eq(m.usage.input_tokens + m.usage.cache_read_input_tokens, count.input_tokens, 'input + cache_read = count_tokens');
        });

        await check(`${label}: the stream's events reassemble to the plain reply`, async () => {
            const plain = await client.messages.create({ ...base, ...noThink });
            const s = await rawStream(client, { ...base, ...noThink });
            eq(s.content, plain.content, 'content');
            eq(s.stop_reason, plain.stop_reason, 'stop_reason');
            eq(s.usage.output_tokens, plain.usage.output_tokens, 'output_tokens');
            const fin = await client.messages.stream({ ...base, ...noThink }).finalMessage();
            eq(fin.content, plain.content, 'the SDK\'s finalMessage');
            eq(fin.usage.output_tokens, 12, 'finalMessage output_tokens');
        });

        await check(`${label}: stop_sequences end the reply and name the sequence`, async () => {
            const long = await client.messages.create({ ...base, ...noThink, max_tokens: 24 });
            const text = long.content[0].text;
            const stop = [...text].slice(4, 6).join('');
            const cut = text.indexOf(stop);
            assert(stop.trim().length > 0 && cut >= 0, `no stop string in ${fmt(text)}`);
            const m = await client.messages.create({ ...base, ...noThink, max_tokens: 24, ignore_eos: false, stop_sequences: [stop] });
            eq(m.stop_reason, 'stop_sequence', 'stop_reason');
            eq(m.stop_sequence, stop, 'stop_sequence');
            eq(m.content.length ? m.content[0].text : '', text.slice(0, cut), 'the text before the sequence');
        });

        const ask = { role: 'user', content: 'Weather in Paris?' };
        const forced = { model: MODEL_NAME, max_tokens: 1500, temperature: 0, tools: [WEATHER], tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
                         messages: [ask], ...noThink };
        let call = null;
        await check(`${label}: a forced tool call is a tool_use block (plain and streamed)`, async () => {
            const m = await client.messages.create(forced);
            eq(m.stop_reason, 'tool_use', 'stop_reason');
            const uses = m.content.filter((b) => b.type === 'tool_use');
            eq(uses.length, 1, `one tool_use block in ${fmt(m.content)}`);
            eq(uses[0].name, 'get_weather', 'name');
            assert(['Paris', 'Rome'].includes(uses[0].input.city) && Object.keys(uses[0].input).length === 1, `input ${fmt(uses[0].input)}`);
            assert(/^toolu_[0-9a-f]{24}$/.test(uses[0].id), `a unique id, not the model's functions.NAME:N: ${uses[0].id}`);
            call = uses[0];
            const s = await rawStream(client, forced);
            eq(s.stop_reason, 'tool_use', 'streamed stop_reason');
            const noId = (content) => content.map(({ id, ...rest }) => (void id, rest));
            eq(noId(s.content), noId(m.content), 'streamed content');
            assert(s.content.find((b) => b.type === 'tool_use').id !== call.id, 'each reply\'s call has its own id');
        });

        await check(`${label}: the tool result goes back and the model answers; count_tokens = the template's render`, async () => {
            assert(call, 'no call from the previous check');
            const history = [ask, { role: 'assistant', content: [call] },
                             { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny, 21 °C' }, { type: 'text', text: 'Thanks!' }] }];
            const m = await client.messages.create({ model: MODEL_NAME, max_tokens: 8, temperature: 0, ignore_eos: true, tools: [WEATHER],
                                                     system: [{ type: 'text', text: 'You are Kimi.', cache_control: { type: 'ephemeral' } }], messages: history, ...noThink });
            eq(m.stop_reason, 'max_tokens', 'stop_reason');
            eq(m.usage.output_tokens, 8, 'output_tokens');
            const count = await client.messages.countTokens({ model: MODEL_NAME, tools: [WEATHER], system: 'You are Kimi.', messages: history, ...noThink });
            // the prompt shows the call as the model writes one: functions.NAME:N, not the client's toolu_ id
            const modelId = 'functions.get_weather:0';
            const openai = {
                messages: [{ role: 'system', content: 'You are Kimi.' }, { role: 'user', content: 'Weather in Paris?' },
                           { role: 'assistant', content: '', tool_calls: [{ id: modelId, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify(call.input) } }] },
                           { role: 'tool', tool_call_id: modelId, content: 'sunny, 21 °C' }, { role: 'user', content: 'Thanks!' }],
                tools: [{ type: 'function', function: { name: WEATHER.name, description: WEATHER.description, parameters: WEATHER.input_schema } }],
                ...(k3 ? { chat_template_kwargs: { thinking: false } } : {}),
            };
            eq(count.input_tokens, templateIds(tmp, modelDir, openai).length, 'count_tokens against chat-template --request');
            eq(m.usage.input_tokens + m.usage.cache_read_input_tokens, count.input_tokens, 'the reply\'s input tokens');
        });

        if (k3) {
            await check(`${label}: thinking enabled gives thinking blocks, its budget the effort; disabled none`, async () => {
                const on = await client.messages.create({ ...base, thinking: { type: 'enabled', budget_tokens: 2048 } });
                eq(on.content[0].type, 'thinking', `first block of ${fmt(on.content)}`);
                assert(on.content[0].thinking.length > 0 && typeof on.content[0].signature === 'string', 'thinking text');
                const s = await rawStream(client, { ...base, thinking: { type: 'enabled', budget_tokens: 2048 } });
                eq(s.content, on.content, 'streamed thinking');
                assert(s.events.some((e) => e.type === 'content_block_delta' && e.delta.type === 'thinking_delta'), 'thinking_delta events');
                const off = await client.messages.create({ ...base, thinking: { type: 'disabled' } });
                assert(off.content.every((b) => b.type !== 'thinking'), `thinking off: ${fmt(off.content)}`);
                const count = async (budget) => (await client.messages.countTokens({ model: MODEL_NAME, messages: base.messages,
                                                                                  thinking: { type: 'enabled', budget_tokens: budget } })).input_tokens;
                const low = templateIds(tmp, modelDir, { messages: base.messages, chat_template_kwargs: { thinking: true, thinking_effort: 'low' } }).length;
                const max = templateIds(tmp, modelDir, { messages: base.messages, chat_template_kwargs: { thinking: true, thinking_effort: 'max' } }).length;
                eq(await count(2048), low, 'budget 2048 → effort low');
                eq(await count(32000), max, 'budget 32000 → effort max');
            });
            await check(`${label}: an image block (base64) reaches the prompt`, async () => {
                const data = png(64, 48, (x, y) => [(x * 4) & 255, (y * 5) & 255, 90]).toString('base64');
                const withImage = [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data } }, { type: 'text', text: 'What is this?' }] }];
                const m = await client.messages.create({ ...base, ...noThink, messages: withImage });
                eq(m.usage.output_tokens, 12, 'output_tokens');
                const a = (await client.messages.countTokens({ model: MODEL_NAME, messages: withImage, ...noThink })).input_tokens;
                const b = (await client.messages.countTokens({ model: MODEL_NAME, messages: [{ role: 'user', content: 'What is this?' }], ...noThink })).input_tokens;
                assert(a > b + 4, `the image adds its tokens: ${a} vs ${b}`);
            });
        }

        await check(`${label}: errors in Anthropic's shape`, async () => {
            const expect = async (params, Cls, status, type, needle, c = client) => {
                let err = null;
                try { await c.messages.create(params); } catch (e) { err = e; }
                assert(err instanceof Cls && err.status === status, `${needle}: got ${err && err.status} ${err && err.message}`);
                eq(err.error?.type, 'error', 'body type');
                eq(err.error?.error?.type, type, 'error type');
                assert(err.error.error.message.includes(needle), `message ${fmt(err.error.error.message)}`);
            };
            const { max_tokens, ...noMax } = base;
            void max_tokens;
            await expect(noMax, errors.BadRequestError, 400, 'invalid_request_error', 'max_tokens');
            await expect({ ...base, messages: [{ role: 'tool', content: 'x' }] }, errors.BadRequestError, 400, 'invalid_request_error', 'role');
            await expect({ ...base, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] }, errors.BadRequestError, 400, 'invalid_request_error', 'document');
            await expect({ ...base, tool_choice: { type: 'any' } }, errors.BadRequestError, 400, 'invalid_request_error', 'no tools');
            await expect({ ...base, model: 'claude-x' }, errors.NotFoundError, 404, 'not_found_error', 'claude-x');
            const wrong = new Anthropic({ baseURL: srv.url, apiKey: 'wrong', maxRetries: 0, timeout: 60000 });
            await expect(base, errors.AuthenticationError, 401, 'authentication_error', 'API key', wrong);
            // Bearer works too, and the anthropic-version / anthropic-beta headers are accepted.
            const r = await fetch(srv.url + '/v1/messages', {
                method: 'POST',
                headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'anthropic-version': '2023-06-01', 'anthropic-beta': 'x' },
                body: JSON.stringify({ ...base, max_tokens: 2 }),
            });
            eq(r.status, 200, 'Bearer auth');
            const bad = await fetch(srv.url + '/v1/messages', { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: '{"model": ' });
            eq(bad.status, 400, 'invalid JSON');
            eq((await bad.json()).error.type, 'invalid_request_error', 'invalid JSON: error type');
        });
        if (!k3) {
            await check(`${label}: thinking is accepted and gives no thinking block (no think channel)`, async () => {
                const m = await client.messages.create({ ...base, thinking: { type: 'enabled', budget_tokens: 1024 } });
                eq(m.content.map((b) => b.type), ['text'], 'blocks');
            });
        }
    } finally {
        await checkShutdown(`${label} server`, srv);
    }
}

async function main() {
    const mod = await importAnthropic(args['node-modules']);
    const Anthropic = mod.default;
    const { tmp } = makeTinyModel(KIMI, 'kimi-anthropic-', 'tiny');
    const t0 = Date.now();
    try {
        await formatChecks(Anthropic, mod, 'Kimi Linear', 'tiny', tmp);
        await formatChecks(Anthropic, mod, 'Kimi-K3', 'k3-tiny', tmp);
    } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
    }
    return report(t0);
}

runMain(main);
