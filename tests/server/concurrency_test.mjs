// End-to-end test: 24 concurrent streaming clients against `kimi-cpp serve --max-num-seqs 8`
// on a random tiny model, a quarter of them disconnecting mid-stream.
//
//   node tests/server/concurrency_test.mjs --kimi /abs/kimi-cpp [--node-modules DIR (unused)]
//
// Checks: every non-aborted stream completes (finish_reason length, [DONE], usage ==
// token chunks); a greedy request run inside the burst gives exactly the text it gives alone
// (batching does not change results); afterwards the engine is idle again with every cache
// block and state slot returned (the aborted requests' included) and the abort counter moved.
// Prints a JSON summary (requests, wall time, tokens, tokens/s, mean TTFT). Exit 0 / 1.
import fs from 'node:fs';
import {
    MODEL_NAME, cliArgs, fmt, assert, eq, usageEq, check, report, runMain, makeTinyModel, startServer, stopServers, checkShutdown,
} from './common.mjs';

const KIMI = cliArgs('usage: concurrency_test.mjs --kimi PATH [--node-modules DIR]', ['kimi']).kimi;
const N_REQUESTS = 24;
const MAX_NUM_SEQS = 8;
const ABORT_AFTER_CHUNKS = 3;

// ---------------------------------------------------------------- SSE over fetch
// One streaming request. abortAfter: abort the connection after that many data chunks.
// Returns {status, chunks, done, aborted, error, ttftMs, text, finish, usage, nTokenChunks}.
async function streamRequest(base, spec) {
    const { endpoint, body, abortAfter = 0 } = spec;
    const ac = new AbortController();
    const t0 = performance.now();
    const out = { spec, status: 0, chunks: [], done: false, aborted: false, error: null, ttftMs: null, text: '', finish: null,
                  usage: null, nTokenChunks: 0, role: null, keepAlives: 0, afterDone: 0, elapsedMs: 0, errorEvent: null };
    const overall = setTimeout(() => ac.abort(new Error('timeout')), 90000);
    try {
        const r = await fetch(base + endpoint, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
            body: JSON.stringify({ ...body, stream: true }),
            signal: ac.signal,
        });
        out.status = r.status;
        if (r.status !== 200) {
            out.error = `HTTP ${r.status}: ${await r.text()}`;
            return out;
        }
        const ct = r.headers.get('content-type') || '';
        if (!ct.startsWith('text/event-stream')) out.error = `content-type ${ct}`;
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
            let res;
            try {
                res = await reader.read();
            } catch (e) {
                if (out.aborted) break;   // our own abort
                throw e;
            }
            if (res.done) break;
            buf += dec.decode(res.value, { stream: true });
            let nl;
            while ((nl = buf.indexOf('\n')) >= 0) {
                const line = buf.slice(0, nl).replace(/\r$/, '');
                buf = buf.slice(nl + 1);
                if (line === '') continue;
                if (line.startsWith(':')) {
                    out.keepAlives++;
                    continue;
                }
                if (!line.startsWith('data:')) {
                    out.error = out.error || `unexpected SSE line ${fmt(line)}`;
                    continue;
                }
                const data = line.slice(5).trim();
                if (out.done) {
                    out.afterDone++;
                    continue;
                }
                if (data === '[DONE]') {
                    out.done = true;
                    continue;
                }
                const j = JSON.parse(data);
                if (j.error) {
                    out.errorEvent = j.error;
                    continue;
                }
                out.chunks.push(j);
                if (j.usage) out.usage = j.usage;
                for (const ch of j.choices || []) {
                    if (out.ttftMs === null) out.ttftMs = performance.now() - t0;
                    out.nTokenChunks++;
                    if (endpoint.includes('chat')) {
                        if (ch.delta && ch.delta.role && out.role === null) out.role = ch.delta.role;
                        if (ch.delta && typeof ch.delta.content === 'string') out.text += ch.delta.content;
                    } else {
                        out.text += ch.text;
                    }
                    if (ch.finish_reason) out.finish = ch.finish_reason;
                }
                if (abortAfter && out.chunks.length >= abortAfter && !out.aborted) {
                    out.aborted = true;
                    ac.abort();
                    buf = '';   // what was already read past the abort point is not looked at
                    break;
                }
            }
        }
    } catch (e) {
        out.error = String(e && e.stack ? e.stack : e);
    } finally {
        clearTimeout(overall);
        out.elapsedMs = performance.now() - t0;
    }
    return out;
}

async function metrics(base) {
    const r = await fetch(base + '/metrics');
    const text = await r.text();
    const m = {};
    for (const line of text.split('\n')) {
        if (!line || line.startsWith('#')) continue;
        const sp = line.lastIndexOf(' ');
        m[line.slice(0, sp)] = Number(line.slice(sp + 1));
    }
    return m;
}

// ---------------------------------------------------------------- main
const PROMPTS = [
    'Tell me a story about a lighthouse.',
    'List five colours.',
    'What is 2 + 2?',
    'Explain photosynthesis briefly.',
    'Write a haiku about rain.',
    'Name three rivers in Europe.',
    'Describe the smell of coffee.',
    'Why is the sky blue?',
    'Give me a recipe for pancakes.',
    'Translate "good morning" into French.',
    'What is the capital of Japan?',
    'Summarise the plot of Hamlet.',
];
// The greedy reference request (also run inside the burst).
const REFERENCE = {
    endpoint: '/v1/chat/completions',
    body: {
        model: MODEL_NAME,
        messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Count from one to ten, please.' }],
        temperature: 0,
        max_tokens: 32,
        ignore_eos: true,
        stream_options: { include_usage: true },
    },
};

function burstSpecs() {
    const specs = [];
    const abortAt = new Set([3, 7, 11, 15, 19, 23]);   // a quarter
    for (let i = 0; i < N_REQUESTS; ++i) {
        if (i === 10) {   // the reference, mid-burst
            specs.push({ ...REFERENCE, name: `#${i} reference`, reference: true });
            continue;
        }
        const chat = i % 2 === 0;
        // 24..48; a request that aborts asks for many more, so that however fast the machine it is
        // still generating when its client hangs up (the abort count below must rise)
        const maxTokens = abortAt.has(i) ? 2048 : 24 + ((i * 7) % 25);
        const sampling = i % 3 === 0 ? { temperature: 0 } : { temperature: 0.8, top_p: 0.95, seed: 100 + i };
        const prompt = PROMPTS[i % PROMPTS.length] + (i >= PROMPTS.length ? ' Please answer in detail.' : '');
        const body = chat
            ? { model: MODEL_NAME, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, ignore_eos: true, stream_options: { include_usage: true }, ...sampling }
            : { model: MODEL_NAME, prompt, max_tokens: maxTokens, ignore_eos: true, stream_options: { include_usage: true }, ...sampling };
        specs.push({ name: `#${i} ${chat ? 'chat' : 'completions'} max_tokens ${maxTokens}${abortAt.has(i) ? ' (aborts)' : ''}`,
                     endpoint: chat ? '/v1/chat/completions' : '/v1/completions', body, abortAfter: abortAt.has(i) ? ABORT_AFTER_CHUNKS : 0 });
    }
    return specs;
}

// A finished (non-aborted) stream: [DONE], finish length, one chunk per token, usage consistent.
function checkComplete(r) {
    const what = r.spec.name;
    assert(!r.error, `${what}: ${r.error}`);
    assert(!r.errorEvent, `${what}: error event ${fmt(r.errorEvent)}`);
    eq(r.status, 200, `${what}: status`);
    assert(r.done, `${what}: no [DONE]`);
    eq(r.afterDone, 0, `${what}: data after [DONE]`);
    eq(r.finish, 'length', `${what}: finish_reason`);
    if (r.spec.endpoint.includes('chat')) eq(r.role, 'assistant', `${what}: first delta role`);
    assert(r.usage, `${what}: no usage chunk`);
    eq(r.usage.completion_tokens, r.nTokenChunks, `${what}: usage.completion_tokens vs token chunks`);
    eq(r.usage.completion_tokens, r.spec.body.max_tokens, `${what}: completion_tokens vs max_tokens`);
    eq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, `${what}: total_tokens`);
    const last = r.chunks[r.chunks.length - 1];
    eq(last.choices, [], `${what}: the usage chunk has choices []`);
    const ids = new Set(r.chunks.map((c) => c.id));
    eq(ids.size, 1, `${what}: chunk ids`);
}

async function main() {
    const { tmp, modelDir } = makeTinyModel(KIMI, 'kimi-concurrency-test-');
    const tStart = Date.now();
    let summary = null;
    try {
        const srv = await startServer(KIMI, modelDir, ['--max-num-seqs', String(MAX_NUM_SEQS), '--threads', '2']);
        console.log(`server at ${srv.url}`);

        let alone = null;
        await check('reference greedy stream alone', async () => {
            alone = await streamRequest(srv.url, { ...REFERENCE, name: 'reference alone' });
            checkComplete(alone);
            eq(alone.usage.completion_tokens, 32, 'completion_tokens');
            assert(alone.text.length > 0, 'empty text');
        });
        const m0 = await metrics(srv.url);

        let results = null, wallMs = 0;
        await check(`${N_REQUESTS} concurrent streams (max-num-seqs ${MAX_NUM_SEQS}), a quarter disconnecting`, async () => {
            const specs = burstSpecs();
            const t0 = performance.now();
            // Poll the engine while the burst runs: it should batch (running > 1) and queue.
            let maxRunning = 0, maxWaiting = 0, polling = true;
            const poller = (async () => {
                while (polling) {
                    try {
                        const m = await metrics(srv.url);
                        maxRunning = Math.max(maxRunning, m['kimi:num_requests_running'] || 0);
                        maxWaiting = Math.max(maxWaiting, m['kimi:num_requests_waiting'] || 0);
                    } catch (_) { /* ignore */ }
                    await new Promise((r) => setTimeout(r, 25));
                }
            })();
            results = await Promise.all(specs.map((s) => streamRequest(srv.url, s)));
            wallMs = performance.now() - t0;
            polling = false;
            await poller;
            console.log(`      engine: at most ${maxRunning} running, ${maxWaiting} waiting`);
            assert(maxRunning <= MAX_NUM_SEQS, `more than max-num-seqs running: ${maxRunning}`);
            const bad = [];
            for (const r of results.filter((x) => !x.spec.abortAfter)) {
                try {
                    checkComplete(r);
                } catch (e) {
                    bad.push(e.message);
                }
            }
            eq(results.filter((x) => !x.spec.abortAfter).length, N_REQUESTS - 6, 'non-aborted requests');
            assert(bad.length === 0, `${bad.length} of ${N_REQUESTS - 6} non-aborted requests failed:\n        ${bad.join('\n        ')}`);
            for (const r of results.filter((x) => x.spec.abortAfter)) {
                assert(r.aborted, `${r.spec.name}: never reached ${ABORT_AFTER_CHUNKS} chunks to abort (${r.error || 'no error'})`);
                assert(!r.error, `${r.spec.name}: ${r.error}`);
            }
        });
        await check('greedy reference inside the burst == alone', async () => {
            assert(alone && results, 'no results');
            const inBurst = results.find((r) => r.spec.reference);
            eq(inBurst.text, alone.text, 'reference text');
            usageEq(inBurst.usage, alone.usage, 'reference usage');
            assert(inBurst.usage.prompt_tokens_details.cached_tokens > 0, `the reference's prompt comes from the prefix cache: ${fmt(inBurst.usage)}`);
        });
        await check('engine idle afterwards: nothing running/waiting, cache blocks and state slots all free', async () => {
            const until = Date.now() + 30000;
            let m;
            for (;;) {
                m = await metrics(srv.url);
                if (m['kimi:num_requests_running'] === 0 && m['kimi:num_requests_waiting'] === 0 && m['kimi:cache_blocks_used'] === 0 &&
                    m['kimi:state_slots_used'] === 0) break;
                if (Date.now() > until) break;
                await new Promise((r) => setTimeout(r, 100));
            }
            const pick = (k) => m[k];
            eq(pick('kimi:num_requests_running'), 0, 'kimi:num_requests_running');
            eq(pick('kimi:num_requests_waiting'), 0, 'kimi:num_requests_waiting');
            eq(pick('kimi:cache_blocks_used'), 0, `kimi:cache_blocks_used (of ${pick('kimi:cache_blocks_total')})`);
            eq(pick('kimi:state_slots_used'), 0, `kimi:state_slots_used (of ${pick('kimi:state_slots_total')})`);
            assert(pick('kimi:cache_blocks_total') > 0 && pick('kimi:state_slots_total') > 0, 'cache totals');
        });
        await check('metrics: finished requests counted by reason (abort >= 1)', async () => {
            const m = await metrics(srv.url);
            const key = (r) => `kimi:request_success_total{finished_reason="${r}"}`;
            const d = (r) => (m[key(r)] || 0) - (m0[key(r)] || 0);
            console.log(`      during the burst: length +${d('length')}, stop +${d('stop')}, abort +${d('abort')}`);
            assert(d('length') >= N_REQUESTS - 6, `length finished ${d('length')} < ${N_REQUESTS - 6}`);
            eq(d('stop'), 0, 'stop finished (ignore_eos, no stop strings)');
            // A disconnect the server noticed before the request finished is an abort; one that came
            // too late is a length finish — either way every request is counted once.
            assert(d('abort') >= 1, `request_success_total{finished_reason="abort"} rose by ${d('abort')} after 6 client disconnects`);
            eq(d('length') + d('abort'), N_REQUESTS, 'length + abort == requests');
        });
        await check('server still serves, same greedy answer, after the burst', async () => {
            const again = await streamRequest(srv.url, { ...REFERENCE, name: 'reference after' });
            checkComplete(again);
            eq(again.text, alone && alone.text, 'reference text');
        });

        if (results) {
            const ok = results.filter((r) => !r.spec.abortAfter);
            const tokens = results.reduce((s, r) => s + (r.usage ? r.usage.completion_tokens : r.nTokenChunks), 0);
            const ttfts = ok.map((r) => r.ttftMs).filter((x) => x !== null);
            summary = {
                requests: results.length,
                aborted: results.filter((r) => r.spec.abortAfter).length,
                max_num_seqs: MAX_NUM_SEQS,
                wall_s: +(wallMs / 1000).toFixed(3),
                total_tokens: tokens,
                tokens_per_s: +(tokens / (wallMs / 1000)).toFixed(1),
                mean_ttft_ms: ttfts.length ? +(ttfts.reduce((a, b) => a + b, 0) / ttfts.length).toFixed(1) : null,
                max_ttft_ms: ttfts.length ? +Math.max(...ttfts).toFixed(1) : null,
                keep_alives: results.reduce((s, r) => s + r.keepAlives, 0),
            };
        }
        await checkShutdown('server', srv);
    } finally {
        await stopServers();
        fs.rmSync(tmp, { recursive: true, force: true });
    }
    if (summary) console.log('summary ' + JSON.stringify(summary));
    return report(tStart);
}

runMain(main);
