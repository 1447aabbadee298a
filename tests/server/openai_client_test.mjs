// End-to-end test: the stock `openai` npm client (v5) drives `kimi-cpp serve` on a random tiny
// model. Chat and completions, streamed and not (the stream reassembled must equal the
// non-streamed answer, usage included), prompts as strings / lists / token ids, echo, n > 1 with
// seeds, logprobs shapes, stop strings, tools, error classes and API-key auth.
//
//   node tests/server/openai_client_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
//
// Exit code 0 when every check passed, 1 otherwise.
import fs from 'node:fs';
import path from 'node:path';
import {
    MODEL_NAME, cliArgs, fmt, assert, eq, usageEq, near, check, report, runMain, makeTinyModel, startServer, checkShutdown,
    importOpenAI,
} from './common.mjs';

const args = cliArgs('usage: openai_client_test.mjs --kimi PATH --node-modules DIR', ['kimi', 'node-modules']);
const KIMI = args.kimi;
const NODE_MODULES = args['node-modules'];

// Runs fn, which must throw an APIError of class cls with this status.
async function expectApiError(fn, cls, status, what) {
    let err = null;
    try {
        await fn();
    } catch (e) {
        err = e;
    }
    assert(err !== null, `${what}: no error was raised`);
    assert(err instanceof cls, `${what}: raised ${err && err.constructor && err.constructor.name} (${err && err.message}), want ${cls.name}`);
    eq(err.status, status, `${what}: status`);
    return err;
}

// ---------------------------------------------------------------- helpers on responses
async function postJson(url, body, headers = {}) {
    const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const text = await r.text();
    let json = null;
    try {
        json = JSON.parse(text);
    } catch (_) { /* not JSON */ }
    return { status: r.status, json, text };
}
async function collectStream(stream) {
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    return chunks;
}
// Reassembles a stream per choice index: fresh(choice) makes a choice's state, add(state, choice)
// takes in each chunk's choice; finish_reason, token chunks and chunks after the finish are counted.
function reassemble(chunks, fresh, add) {
    const by = new Map();
    let usage = null;
    for (const c of chunks) {
        if (c.usage) usage = c.usage;
        for (const ch of c.choices) {
            if (!by.has(ch.index)) by.set(ch.index, fresh(ch));
            const s = by.get(ch.index);
            if (s.finish !== null) s.afterFinish++;
            s.nChunks++;
            add(s, ch);
            if (ch.finish_reason) s.finish = ch.finish_reason;
        }
    }
    return { by, usage };
}
// A chat stream: content, first delta, role, tool calls and logprobs.
function reassembleChat(chunks) {
    return reassemble(chunks, (ch) => ({ content: '', firstDelta: ch.delta, role: null, finish: null, nChunks: 0, logprobs: [], toolCalls: [], afterFinish: 0 }),
                      (s, ch) => {
                          if (ch.delta.role) s.role = s.role ?? ch.delta.role;
                          if (typeof ch.delta.content === 'string') s.content += ch.delta.content;
                          if (ch.delta.tool_calls) s.toolCalls.push(...ch.delta.tool_calls);
                          if (ch.logprobs && ch.logprobs.content) s.logprobs.push(...ch.logprobs.content);
                      });
}
// A completions stream: text.
function reassembleCompletion(chunks) {
    return reassemble(chunks, () => ({ text: '', finish: null, nChunks: 0, afterFinish: 0 }), (s, ch) => {
        s.text += ch.text;
    });
}
function checkUsage(u, what) {
    assert(u && typeof u === 'object', `${what}: usage missing`);
    for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens'])
        assert(Number.isInteger(u[k]) && u[k] >= 0, `${what}: usage.${k} = ${fmt(u[k])}`);
    eq(u.total_tokens, u.prompt_tokens + u.completion_tokens, `${what}: total_tokens`);
    assert(u.prompt_tokens_details && Number.isInteger(u.prompt_tokens_details.cached_tokens),
           `${what}: usage.prompt_tokens_details.cached_tokens = ${fmt(u.prompt_tokens_details)}`);
}
function checkEnvelope(r, object, what) {
    assert(typeof r.id === 'string' && r.id.length > 0, `${what}: id = ${fmt(r.id)}`);
    eq(r.object, object, `${what}: object`);
    assert(Number.isInteger(r.created) && Math.abs(r.created - Date.now() / 1000) < 3600, `${what}: created = ${r.created}`);
    eq(r.model, MODEL_NAME, `${what}: model`);
    assert(typeof r.system_fingerprint === 'string' && r.system_fingerprint.length > 0, `${what}: system_fingerprint`);
    assert(Array.isArray(r.choices), `${what}: choices is not an array`);
}
function checkStreamEnvelopes(chunks, object, what) {
    assert(chunks.length > 0, `${what}: no chunks`);
    const id = chunks[0].id;
    for (const c of chunks) {
        checkEnvelope(c, object, what + ' chunk');
        eq(c.id, id, `${what}: every chunk has the same id`);
    }
}
// A 3-character substring near the middle of text, made of plain BMP characters (no U+FFFD, no
// surrogates, no control characters) so it means the same thing to the client and the server.
function middleSubstring(text) {
    const cps = Array.from(text);
    const ok = (c) => c.length === 1 && c !== '\uFFFD' && c.charCodeAt(0) >= 0x20 && c.charCodeAt(0) !== 0x7f;
    const mid = Math.floor(cps.length / 2);
    for (let d = 0; d < cps.length; ++d) {
        for (const i of [mid + d, mid - d]) {
            if (i < 1 || i + 3 > cps.length) continue;
            const s = cps.slice(i, i + 3);
            if (s.every(ok)) return s.join('');
        }
    }
    return null;
}

// ---------------------------------------------------------------- main
async function main() {
    const mod = await importOpenAI(NODE_MODULES);
    const OpenAI = mod.default;
    const { APIError, NotFoundError, BadRequestError, AuthenticationError } = mod;
    const version = JSON.parse(fs.readFileSync(path.join(NODE_MODULES, 'openai/package.json'), 'utf8')).version;
    console.log(`openai client ${version} (${path.join(NODE_MODULES, "openai")})`);

    const { tmp, modelDir } = makeTinyModel(KIMI, 'kimi-openai-test-');

    const t0 = Date.now();
    let srv = null, authSrv = null;
    try {
        srv = await startServer(KIMI, modelDir, ['--threads', '2']);
        console.log(`server at ${srv.url}`);
        const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'whatever', maxRetries: 0, timeout: 60000 });

        // ------------------------------------------------------------ models
        await check('models.list: the served model with root and max_model_len', async () => {
            const page = await client.models.list();
            const models = [];
            for await (const m of page) models.push(m);
            eq(models.length, 1, 'number of models');
            const m = models[0];
            eq(m.id, MODEL_NAME, 'id');
            eq(m.object, 'model', 'object');
            assert(Number.isInteger(m.created), `created = ${m.created}`);
            assert(typeof m.owned_by === 'string' && m.owned_by.length > 0, `owned_by = ${fmt(m.owned_by)}`);
            assert(typeof m.root === 'string' && m.root.length > 0, `root = ${fmt(m.root)}`);
            assert(Number.isInteger(m.max_model_len) && m.max_model_len >= 256, `max_model_len = ${m.max_model_len}`);
            const one = await client.models.retrieve(MODEL_NAME).catch((e) => e);
            // retrieve (GET /v1/models/{id}) is optional; when it answers 200 it must be the same card.
            if (!(one instanceof Error)) eq(one.id, MODEL_NAME, 'models.retrieve id');
        });

        // ------------------------------------------------------------ extra body fields reach the server
        await check('extra (vLLM) fields in the params object are sent in the body', async () => {
            // repetition_penalty must be > 0: a 400 naming it proves the field was passed through.
            const e = await expectApiError(
                () => client.chat.completions.create({ model: MODEL_NAME, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, repetition_penalty: 0 }),
                BadRequestError, 400, 'repetition_penalty 0');
            eq(e.param, 'repetition_penalty', 'error param');
            // ignore_eos true and max_tokens: the answer runs to max_tokens.
            const r = await client.chat.completions.create({ model: MODEL_NAME, messages: [{ role: 'user', content: 'hi' }], max_tokens: 40, temperature: 0, ignore_eos: true });
            eq(r.usage.completion_tokens, 40, 'completion_tokens with ignore_eos');
            eq(r.choices[0].finish_reason, 'length', 'finish_reason with ignore_eos');
        });

        // ------------------------------------------------------------ chat, greedy, stream vs non-stream
        const chatParams = {
            model: MODEL_NAME,
            messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me about the sea.' }],
            temperature: 0,
            max_tokens: 24,
            ignore_eos: true,
        };
        let chatRef = null;
        await check('chat non-stream greedy: shape and usage', async () => {
            const r = await client.chat.completions.create(chatParams);
            checkEnvelope(r, 'chat.completion', 'chat');
            assert(r.id.startsWith('chatcmpl-'), `id ${r.id}`);
            eq(r.choices.length, 1, 'choices');
            const c = r.choices[0];
            eq(c.index, 0, 'index');
            eq(c.message.role, 'assistant', 'role');
            assert(typeof c.message.content === 'string' && c.message.content.length > 0, `content = ${fmt(c.message.content)}`);
            eq(c.finish_reason, 'length', 'finish_reason');
            eq(c.logprobs, null, 'logprobs when not asked');
            checkUsage(r.usage, 'chat');
            eq(r.usage.completion_tokens, 24, 'completion_tokens');
            assert(r.usage.prompt_tokens > 5, `prompt_tokens = ${r.usage.prompt_tokens}`);
            const again = await client.chat.completions.create(chatParams);
            eq(again.choices[0].message.content, c.message.content, 'greedy is deterministic');
            chatRef = r;
        });
        await check('chat stream (include_usage) == non-stream', async () => {
            assert(chatRef, 'no reference');
            const chunks = await collectStream(await client.chat.completions.create({ ...chatParams, stream: true, stream_options: { include_usage: true } }));
            checkStreamEnvelopes(chunks, 'chat.completion.chunk', 'chat stream');
            const { by, usage } = reassembleChat(chunks);
            eq([...by.keys()], [0], 'choice indexes');
            const s = by.get(0);
            eq(s.firstDelta.role, 'assistant', 'first chunk delta.role');
            eq(s.content, chatRef.choices[0].message.content, 'concatenated deltas');
            eq(s.finish, chatRef.choices[0].finish_reason, 'finish_reason');
            eq(s.afterFinish, 0, 'chunks after the finish_reason chunk');
            eq(s.nChunks, chatRef.usage.completion_tokens, 'one chunk per generated token');
            const last = chunks[chunks.length - 1];
            eq(last.choices, [], 'the usage chunk has choices []');
            usageEq(usage, chatRef.usage, 'stream usage == non-stream usage');
            assert(usage.prompt_tokens_details.cached_tokens > 0, `the repeated prompt comes from the prefix cache: ${fmt(usage)}`);
            for (const c of chunks.slice(0, -1)) assert(!c.usage, 'usage only on the final chunk');
            // Without include_usage there is no usage chunk.
            const plain = await collectStream(await client.chat.completions.create({ ...chatParams, stream: true }));
            assert(plain.every((c) => !c.usage && c.choices.length === 1), 'no usage chunk without include_usage');
            eq(reassembleChat(plain).by.get(0).content, chatRef.choices[0].message.content, 'stream without usage: content');
        });
        await check('chat: max_completion_tokens is honoured like max_tokens', async () => {
            const { max_tokens, ...rest } = chatParams;
            const r = await client.chat.completions.create({ ...rest, max_completion_tokens: 7 });
            eq(r.usage.completion_tokens, 7, 'completion_tokens');
        });

        // ------------------------------------------------------------ completions, greedy
        const prompt = 'The quick brown fox';
        const compParams = { model: MODEL_NAME, prompt, temperature: 0, max_tokens: 24, ignore_eos: true };
        let compRef = null;
        await check('completions non-stream greedy: shape and usage', async () => {
            const r = await client.completions.create(compParams);
            checkEnvelope(r, 'text_completion', 'completion');
            assert(r.id.startsWith('cmpl-'), `id ${r.id}`);
            eq(r.choices.length, 1, 'choices');
            const c = r.choices[0];
            eq(c.index, 0, 'index');
            assert(typeof c.text === 'string' && c.text.length > 0, `text = ${fmt(c.text)}`);
            eq(c.finish_reason, 'length', 'finish_reason');
            eq(c.logprobs, null, 'logprobs when not asked');
            checkUsage(r.usage, 'completion');
            eq(r.usage.completion_tokens, 24, 'completion_tokens');
            compRef = r;
        });
        await check('completions stream (include_usage) == non-stream', async () => {
            assert(compRef, 'no reference');
            const chunks = await collectStream(await client.completions.create({ ...compParams, stream: true, stream_options: { include_usage: true } }));
            checkStreamEnvelopes(chunks, 'text_completion', 'completion stream');
            const { by, usage } = reassembleCompletion(chunks);
            eq([...by.keys()], [0], 'choice indexes');
            const s = by.get(0);
            eq(s.text, compRef.choices[0].text, 'concatenated text');
            eq(s.finish, compRef.choices[0].finish_reason, 'finish_reason');
            eq(s.afterFinish, 0, 'chunks after the finish_reason chunk');
            eq(s.nChunks, compRef.usage.completion_tokens, 'one chunk per generated token');
            eq(chunks[chunks.length - 1].choices, [], 'the usage chunk has choices []');
            usageEq(usage, compRef.usage, 'stream usage == non-stream usage');
        });
        let promptIds = null;
        await check('completions: prompt as token ids / list of strings / list of id lists', async () => {
            assert(compRef, 'no reference');
            const tk = await postJson(srv.url + '/tokenize', { model: MODEL_NAME, prompt });
            eq(tk.status, 200, '/tokenize status');
            promptIds = tk.json.tokens;
            eq(tk.json.count, promptIds.length, '/tokenize count');
            eq(promptIds.length, compRef.usage.prompt_tokens, '/tokenize count == prompt_tokens');
            const byIds = await client.completions.create({ ...compParams, prompt: promptIds });
            eq(byIds.choices[0].text, compRef.choices[0].text, 'token-id prompt: text');
            usageEq(byIds.usage, compRef.usage, 'token-id prompt: usage');

            const other = 'Once upon a time';
            const otherAlone = await client.completions.create({ ...compParams, prompt: other });
            const list = await client.completions.create({ ...compParams, prompt: [prompt, other] });
            eq(list.choices.map((c) => c.index), [0, 1], 'list of strings: indexes');
            eq(list.choices[0].text, compRef.choices[0].text, 'list of strings: choice 0 text');
            eq(list.choices[1].text, otherAlone.choices[0].text, 'list of strings: choice 1 text');
            eq(list.usage.prompt_tokens, compRef.usage.prompt_tokens + otherAlone.usage.prompt_tokens, 'list: prompt_tokens');
            eq(list.usage.completion_tokens, 48, 'list: completion_tokens');

            const otherIds = (await postJson(srv.url + '/tokenize', { prompt: other })).json.tokens;
            const lists = await client.completions.create({ ...compParams, prompt: [promptIds, otherIds] });
            eq(lists.choices.map((c) => c.text), list.choices.map((c) => c.text), 'list of id lists: texts');

            const streamed = reassembleCompletion(await collectStream(await client.completions.create({ ...compParams, prompt: [prompt, other], stream: true, stream_options: { include_usage: true } })));
            eq([...streamed.by.keys()].sort(), [0, 1], 'list stream: indexes');
            eq([0, 1].map((i) => streamed.by.get(i).text), list.choices.map((c) => c.text), 'list stream: texts');
            usageEq(streamed.usage, list.usage, 'list stream: usage');
        });
        await check('completions: echo true prepends the prompt', async () => {
            assert(compRef, 'no reference');
            const r = await client.completions.create({ ...compParams, echo: true });
            const t = r.choices[0].text;
            assert(t.startsWith(prompt), `text does not start with the prompt: ${fmt(t)}`);
            eq(t, prompt + compRef.choices[0].text, 'echo text');
            usageEq(r.usage, compRef.usage, 'echo usage');
            const s = reassembleCompletion(await collectStream(await client.completions.create({ ...compParams, echo: true, stream: true })));
            eq(s.by.get(0).text, t, 'echo stream text');
            const e = await expectApiError(() => client.completions.create({ ...compParams, echo: true, logprobs: 1 }), BadRequestError, 400, 'echo with logprobs');
            assert(e instanceof APIError, 'APIError');
        });

        // ------------------------------------------------------------ n > 1, seeded
        await check('chat n=3 seeded (temperature 1): indexes, reproducible, seed + k, stream == non-stream', async () => {
            const p = { model: MODEL_NAME, messages: [{ role: 'user', content: 'Pick three random words.' }], n: 3, seed: 1234, temperature: 1, max_tokens: 16, ignore_eos: true };
            const a = await client.chat.completions.create(p);
            eq(a.choices.map((c) => c.index), [0, 1, 2], 'indexes');
            for (const c of a.choices) {
                eq(c.message.role, 'assistant', 'role');
                eq(c.finish_reason, 'length', 'finish_reason');
            }
            eq(a.usage.completion_tokens, 48, 'completion_tokens (3 × 16)');
            const texts = a.choices.map((c) => c.message.content);
            assert(new Set(texts).size > 1, `the 3 sampled choices are all the same: ${fmt(texts)}`);
            const b = await client.chat.completions.create(p);
            eq(b.choices.map((c) => c.message.content), texts, 'same seeded request → same choices');
            const k2 = await client.chat.completions.create({ ...p, n: 1, seed: 1236 });
            eq(k2.choices[0].message.content, texts[2], 'choice 2 == an n=1 request with seed + 2');
            const chunks = await collectStream(await client.chat.completions.create({ ...p, stream: true, stream_options: { include_usage: true } }));
            const { by, usage } = reassembleChat(chunks);
            eq([...by.keys()].sort(), [0, 1, 2], 'stream indexes');
            for (let i = 0; i < 3; ++i) {
                const s = by.get(i);
                eq(s.firstDelta.role, 'assistant', `stream choice ${i}: first delta role`);
                eq(s.content, texts[i], `stream choice ${i}: content`);
                eq(s.finish, 'length', `stream choice ${i}: finish_reason`);
                eq(s.nChunks, 16, `stream choice ${i}: chunks`);
            }
            usageEq(usage, a.usage, 'stream usage');
        });
        await check('completions n=2 over a list of 2 prompts: index = prompt_index*n + k', async () => {
            const p = { model: MODEL_NAME, prompt: ['alpha beta', 'gamma delta'], n: 2, seed: 7, temperature: 1, max_tokens: 8, ignore_eos: true };
            const a = await client.completions.create(p);
            eq(a.choices.map((c) => c.index), [0, 1, 2, 3], 'indexes');
            const single = await client.completions.create({ ...p, prompt: 'gamma delta', n: 1, seed: 8 });
            eq(a.choices[3].text, single.choices[0].text, 'choice 3 == prompt 1 with seed + 1');
            const s = reassembleCompletion(await collectStream(await client.completions.create({ ...p, stream: true })));
            eq([0, 1, 2, 3].map((i) => s.by.get(i) && s.by.get(i).text), a.choices.map((c) => c.text), 'stream texts');
        });

        // ------------------------------------------------------------ logprobs
        await check('chat logprobs (top_logprobs 3): shape, greedy token is the top one, stream == non-stream', async () => {
            const p = { ...chatParams, max_tokens: 16, logprobs: true, top_logprobs: 3 };
            const r = await client.chat.completions.create(p);
            const lp = r.choices[0].logprobs;
            assert(lp && Array.isArray(lp.content), `logprobs = ${fmt(lp)}`);
            eq(lp.content.length, r.usage.completion_tokens, 'logprobs.content length');
            lp.content.forEach((e, i) => {
                const at = `content[${i}]`;
                assert(typeof e.token === 'string', `${at}.token`);
                assert(typeof e.logprob === 'number' && e.logprob <= 1e-6, `${at}.logprob = ${e.logprob}`);
                assert(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256), `${at}.bytes = ${fmt(e.bytes)}`);
                assert(Array.isArray(e.top_logprobs), `${at}.top_logprobs`);
                eq(e.top_logprobs.length, 3, `${at}.top_logprobs length`);
                for (const t of e.top_logprobs) {
                    assert(typeof t.token === 'string' && typeof t.logprob === 'number' && Array.isArray(t.bytes), `${at} top entry ${fmt(t)}`);
                }
                for (let j = 1; j < 3; ++j) assert(e.top_logprobs[j - 1].logprob >= e.top_logprobs[j].logprob, `${at}.top_logprobs not sorted`);
                near(e.logprob, Math.max(...e.top_logprobs.map((t) => t.logprob)), 1e-5, `${at}: greedy logprob == max top logprob`);
                eq(e.top_logprobs[0].token, e.token, `${at}: top_logprobs[0] is the chosen token`);
                eq(e.top_logprobs[0].bytes, e.bytes, `${at}: top_logprobs[0].bytes`);
            });
            // top_logprobs 0 with logprobs true: entries with empty top lists.
            const zero = await client.chat.completions.create({ ...chatParams, max_tokens: 4, logprobs: true, top_logprobs: 0 });
            eq(zero.choices[0].logprobs.content.length, 4, 'top_logprobs 0: content length');
            assert(zero.choices[0].logprobs.content.every((e) => Array.isArray(e.top_logprobs) && e.top_logprobs.length === 0), 'top_logprobs 0: empty top lists');
            const s = reassembleChat(await collectStream(await client.chat.completions.create({ ...p, stream: true }))).by.get(0);
            eq(s.logprobs.length, lp.content.length, 'stream logprobs count');
            eq(s.logprobs.map((e) => [e.token, e.bytes]), lp.content.map((e) => [e.token, e.bytes]), 'stream logprobs tokens');
            s.logprobs.forEach((e, i) => near(e.logprob, lp.content[i].logprob, 1e-5, `stream logprob ${i}`));
            await expectApiError(() => client.chat.completions.create({ ...chatParams, top_logprobs: 3 }), BadRequestError, 400, 'top_logprobs without logprobs');
            await expectApiError(() => client.chat.completions.create({ ...chatParams, logprobs: true, top_logprobs: 21 }), BadRequestError, 400, 'top_logprobs 21');
        });
        await check('completions logprobs 2: shape, greedy token is the top one', async () => {
            const r = await client.completions.create({ ...compParams, max_tokens: 16, logprobs: 2 });
            const lp = r.choices[0].logprobs;
            const n = r.usage.completion_tokens;
            assert(lp && typeof lp === 'object', `logprobs = ${fmt(lp)}`);
            eq(lp.tokens.length, n, 'tokens length');
            eq(lp.token_logprobs.length, n, 'token_logprobs length');
            eq(lp.top_logprobs.length, n, 'top_logprobs length');
            eq(lp.text_offset.length, n, 'text_offset length');
            eq(lp.text_offset[0], 0, 'text_offset[0] (no echo)');
            let collided = 0;
            for (let i = 0; i < n; ++i) {
                const at = `[${i}]`;
                assert(typeof lp.tokens[i] === 'string', `tokens${at}`);
                assert(typeof lp.token_logprobs[i] === 'number' && lp.token_logprobs[i] <= 1e-6, `token_logprobs${at}`);
                if (i) assert(lp.text_offset[i] >= lp.text_offset[i - 1], `text_offset not non-decreasing at ${i}`);
                const top = lp.top_logprobs[i];
                const vals = Object.values(top);
                assert(vals.length >= 1 && vals.length <= 2, `top_logprobs${at} has ${vals.length} entries`);
                // Two top tokens may render to the same string (a dict key), hence "<= 2".
                if (vals.length === 2) near(lp.token_logprobs[i], Math.max(...vals), 1e-5, `${at}: greedy logprob == max top logprob`);
                else {
                    ++collided;
                    assert(lp.token_logprobs[i] >= Math.max(...vals) - 1e-5, `${at}: greedy logprob below a top alternative`);
                }
                assert(lp.tokens[i] in top, `${at}: chosen token ${fmt(lp.tokens[i])} not among the top ones ${fmt(top)}`);
            }
            if (collided) console.log(`      note: ${collided} of ${n} top_logprobs dicts had two tokens with the same text`);
            await expectApiError(() => client.completions.create({ ...compParams, logprobs: 21 }), BadRequestError, 400, 'logprobs 21');
        });

        // ------------------------------------------------------------ stop strings
        await check('stop string: output is the greedy text up to the first occurrence, finish_reason stop', async () => {
            assert(chatRef && compRef, 'no reference');
            for (const [kind, ref] of [['chat', chatRef.choices[0].message.content], ['completions', compRef.choices[0].text]]) {
                const stop = middleSubstring(ref);
                assert(stop, `${kind}: no plain 3-character substring in ${fmt(ref)}`);
                const want = ref.slice(0, ref.indexOf(stop));
                const r = kind === 'chat'
                    ? await client.chat.completions.create({ ...chatParams, stop: [stop] })
                    : await client.completions.create({ ...compParams, stop });
                const got = kind === 'chat' ? r.choices[0].message.content : r.choices[0].text;
                console.log(`      ${kind}: stop ${fmt(stop)} → ${Array.from(want).length} of ${Array.from(ref).length} characters kept, ${r.usage.completion_tokens} tokens`);
                eq(got, want, `${kind}: text with stop ${fmt(stop)}`);
                eq(r.choices[0].finish_reason, 'stop', `${kind}: finish_reason`);
                assert(r.usage.completion_tokens < 24, `${kind}: completion_tokens ${r.usage.completion_tokens}`);
                const s = kind === 'chat'
                    ? reassembleChat(await collectStream(await client.chat.completions.create({ ...chatParams, stop: [stop], stream: true }))).by.get(0)
                    : reassembleCompletion(await collectStream(await client.completions.create({ ...compParams, stop, stream: true }))).by.get(0);
                eq(kind === 'chat' ? s.content : s.text, want, `${kind} stream: text with stop`);
                eq(s.finish, 'stop', `${kind} stream: finish_reason`);
            }
        });

        // ------------------------------------------------------------ tools
        const tools = [{
            type: 'function',
            function: {
                name: 'get_weather',
                description: 'Get the current weather for a city',
                parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
            },
        }];
        const toolConversation = [
            { role: 'user', content: 'What is the weather in Paris?' },
            { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
            { role: 'tool', tool_call_id: 'call_1', content: '{"temperature_c":21}' },
        ];
        await check('tools: a tool-call conversation is accepted and answered', async () => {
            const r = await client.chat.completions.create({ model: MODEL_NAME, messages: toolConversation, tools, temperature: 0, max_tokens: 16 });
            checkEnvelope(r, 'chat.completion', 'tools');
            eq(r.choices.length, 1, 'choices');
            const m = r.choices[0].message;
            eq(m.role, 'assistant', 'role');
            assert(typeof m.content === 'string' || (Array.isArray(m.tool_calls) && m.tool_calls.length > 0), `message = ${fmt(m)}`);
            if (m.tool_calls) {
                for (const tc of m.tool_calls) assert(tc.type === 'function' && typeof tc.id === 'string' && typeof tc.function.name === 'string' && typeof tc.function.arguments === 'string', `tool call ${fmt(tc)}`);
                eq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason with tool calls');
            } else {
                assert(['stop', 'length'].includes(r.choices[0].finish_reason), `finish_reason ${r.choices[0].finish_reason}`);
            }
            checkUsage(r.usage, 'tools');
            const s = reassembleChat(await collectStream(await client.chat.completions.create({ model: MODEL_NAME, messages: toolConversation, tools, temperature: 0, max_tokens: 16, stream: true }))).by.get(0);
            eq(s.finish, r.choices[0].finish_reason, 'tools stream: finish_reason');
            if (!m.tool_calls) eq(s.content, m.content, 'tools stream: content');
            // tool_choice "none" is accepted; a forced call is a well-formed call with schema-valid arguments.
            const none = await client.chat.completions.create({ model: MODEL_NAME, messages: toolConversation, tools, tool_choice: 'none', temperature: 0, max_tokens: 4 });
            eq(none.choices[0].message.role, 'assistant', 'tool_choice none: role');
            const forcedParams = { model: MODEL_NAME, messages: toolConversation, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
                                   parallel_tool_calls: false, seed: 7, max_tokens: 1500 };
            const forced = await client.chat.completions.create(forcedParams);
            eq(forced.choices[0].finish_reason, 'tool_calls', 'forced tool_choice: finish_reason');
            const calls = forced.choices[0].message.tool_calls;
            assert(Array.isArray(calls) && calls.length === 1, `forced tool_choice: one call, got ${fmt(forced.choices[0].message)}`);
            eq(calls[0].function.name, 'get_weather', 'forced tool_choice: name');
            const args = JSON.parse(calls[0].function.arguments);
            assert(typeof args.city === 'string' && Object.keys(args).every((k) => k === 'city'), `forced tool_choice: arguments ${fmt(args)}`);
            const forcedStream = reassembleChat(await collectStream(await client.chat.completions.create({ ...forcedParams, stream: true }))).by.get(0);
            eq(forcedStream.finish, 'tool_calls', 'forced tool_choice stream: finish_reason');
            eq(forcedStream.toolCalls.length, 1, 'forced tool_choice stream: one call');
            eq(forcedStream.toolCalls[0].function.name, calls[0].function.name, 'forced tool_choice stream: name');
            eq(forcedStream.toolCalls[0].function.arguments, calls[0].function.arguments, 'forced tool_choice stream: arguments');
        });
        await check('structured output: response_format json_schema through the stock client', async () => {
            const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, n: { type: 'integer', minimum: 0, maximum: 9 } },
                             required: ['name', 'n'], additionalProperties: false };
            const r = await client.chat.completions.create({ model: MODEL_NAME, messages: [{ role: 'user', content: 'Give JSON' }], seed: 3, max_tokens: 400,
                                                             response_format: { type: 'json_schema', json_schema: { name: 'thing', schema, strict: true } } });
            eq(r.choices[0].finish_reason, 'stop', 'json_schema: finish_reason');
            const v = JSON.parse(r.choices[0].message.content);
            assert(typeof v.name === 'string' && [...v.name].length <= 12 && Number.isInteger(v.n) && v.n >= 0 && v.n <= 9 &&
                   Object.keys(v).length === 2, `json_schema: ${fmt(v)}`);
            const c = await client.completions.create({ model: MODEL_NAME, prompt: 'Answer:', max_tokens: 20, guided_choice: ['yes', 'no'] });
            assert(['yes', 'no'].includes(c.choices[0].text), `guided_choice: ${fmt(c.choices[0].text)}`);
            await expectApiError(() => client.chat.completions.create({ model: MODEL_NAME, messages: [{ role: 'user', content: 'x' }], max_tokens: 4,
                                                                       response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'object', not: {} } } } }),
                                 BadRequestError, 400, 'json_schema with an unsupported keyword');
        });
        await check('tools: /tokenize renders the declared tools and the tool-call turns', async () => {
            const userOnly = [{ role: 'user', content: 'What is the weather in Paris?' }];
            const plain = await postJson(srv.url + '/tokenize', { model: MODEL_NAME, messages: userOnly });
            const withTools = await postJson(srv.url + '/tokenize', { model: MODEL_NAME, messages: userOnly, tools });
            eq(plain.status, 200, '/tokenize status');
            eq(withTools.status, 200, '/tokenize with tools: status');
            assert(withTools.json.count > plain.json.count, `tools did not lengthen the prompt (${plain.json.count} vs ${withTools.json.count})`);
            assert(JSON.stringify(withTools.json.tokens) !== JSON.stringify(plain.json.tokens), 'same tokens with and without tools');
            const de = await postJson(srv.url + '/detokenize', { tokens: withTools.json.tokens });
            assert(de.json.prompt.includes('get_weather'), `tool name not in the rendered prompt: ${fmt(de.json.prompt)}`);
            const conv = await postJson(srv.url + '/tokenize', { model: MODEL_NAME, messages: toolConversation, tools });
            const text = (await postJson(srv.url + '/detokenize', { tokens: conv.json.tokens })).json.prompt;
            assert(text.includes('{"city":"Paris"}'), `tool-call arguments not rendered: ${fmt(text)}`);
            assert(text.includes('{"temperature_c":21}'), `tool result not rendered: ${fmt(text)}`);
            // The same conversation through chat reports the same prompt length.
            const r = await client.chat.completions.create({ model: MODEL_NAME, messages: toolConversation, tools, temperature: 0, max_tokens: 1 });
            eq(r.usage.prompt_tokens, conv.json.count, 'chat prompt_tokens == /tokenize count');
        });

        // ------------------------------------------------------------ errors
        await check('errors: unknown model → NotFoundError 404', async () => {
            const e = await expectApiError(() => client.chat.completions.create({ ...chatParams, model: 'no-such-model' }), NotFoundError, 404, 'chat unknown model');
            assert(e instanceof APIError, 'APIError subclass');
            assert(typeof e.message === 'string' && e.message.includes('no-such-model'), `message ${fmt(e.message)}`);
            await expectApiError(() => client.completions.create({ ...compParams, model: 'no-such-model' }), NotFoundError, 404, 'completions unknown model');
            await expectApiError(() => client.chat.completions.create({ ...chatParams, model: 'no-such-model', stream: true }), NotFoundError, 404, 'stream unknown model');
        });
        await check('errors: max_tokens beyond the context → BadRequestError 400', async () => {
            const e = await expectApiError(() => client.chat.completions.create({ ...chatParams, max_tokens: 100000 }), BadRequestError, 400, 'chat max_tokens 100000');
            assert(/context/i.test(e.message), `message ${fmt(e.message)}`);
            await expectApiError(() => client.completions.create({ ...compParams, max_tokens: 100000 }), BadRequestError, 400, 'completions max_tokens 100000');
            await expectApiError(() => client.completions.create({ ...compParams, max_tokens: 100000, stream: true }), BadRequestError, 400, 'stream max_tokens 100000');
        });
        await check('errors: temperature -1 → BadRequestError 400', async () => {
            const e = await expectApiError(() => client.chat.completions.create({ ...chatParams, temperature: -1 }), BadRequestError, 400, 'chat temperature -1');
            eq(e.param, 'temperature', 'param');
            eq(e.type, 'invalid_request_error', 'type');
            await expectApiError(() => client.completions.create({ ...compParams, temperature: -1 }), BadRequestError, 400, 'completions temperature -1');
            await expectApiError(() => client.chat.completions.create({ ...chatParams, temperature: -1, stream: true }), BadRequestError, 400, 'stream temperature -1');
        });
        await check('server still serves after the errors', async () => {
            const r = await client.chat.completions.create(chatParams);
            eq(r.choices[0].message.content, chatRef && chatRef.choices[0].message.content, 'greedy content');
        });

        // ------------------------------------------------------------ API key
        await check('--api-key: wrong key → AuthenticationError 401, right key works', async () => {
            authSrv = await startServer(KIMI, modelDir, ['--threads', '2', '--api-key', 'sekrit-key']);
            const bad = new OpenAI({ baseURL: authSrv.url + '/v1', apiKey: 'wrong-key', maxRetries: 0, timeout: 30000 });
            await expectApiError(() => bad.models.list(), AuthenticationError, 401, 'models.list with a wrong key');
            await expectApiError(() => bad.chat.completions.create(chatParams), AuthenticationError, 401, 'chat with a wrong key');
            await expectApiError(() => bad.completions.create({ ...compParams, stream: true }), AuthenticationError, 401, 'stream with a wrong key');
            const good = new OpenAI({ baseURL: authSrv.url + '/v1', apiKey: 'sekrit-key', maxRetries: 0, timeout: 30000 });
            const models = await good.models.list();
            eq(models.data.map((m) => m.id), [MODEL_NAME], 'models with the right key');
            const r = await good.chat.completions.create(chatParams);
            eq(r.choices[0].message.content, chatRef && chatRef.choices[0].message.content, 'chat with the right key');
            const h = await fetch(authSrv.url + '/health');
            eq(h.status, 200, '/health needs no key');
        });
    } finally {
        for (const [name, s] of [['auth server', authSrv], ['server', srv]]) if (s) await checkShutdown(name, s);
        fs.rmSync(tmp, { recursive: true, force: true });
    }
    return report(t0);
}

runMain(main);
