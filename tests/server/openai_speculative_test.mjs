// Speculative decoding through `kimi-cpp serve --speculative-config` with the stock `openai`
// client, on a Kimi Linear and a Kimi-K3 random tiny model. The ngram proposer: completions,
// greedy and seeded, streamed and not, equal a plain server's answer, text and logprobs,
// bit for bit; six concurrent requests on a cache small enough to preempt them equal it too;
// a stream cancelled in the middle of its verifications frees everything; /metrics counts
// drafts and accepted tokens. The three favoured tokens (logit_bias) make the output a string
// over three letters whose n-grams recur, so drafts are both accepted and rejected. A draft
// model (another random model with the same tokenizer): greedy completions and chat
// completions, streamed and not, equal plain decoding; seeded ones are reproducible and the same
// streamed; a seeded n = 2 beside greedy fillers equals plain decoding under either proposer;
// /metrics counts its drafts.
//
//   node tests/server/openai_speculative_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
    MODEL_NAME, cliArgs, fmt, assert, eq, check, report, runMain, makeTinyModel, startServer, checkShutdown, importOpenAI,
} from './common.mjs';

const args = cliArgs('usage: openai_speculative_test.mjs --kimi PATH --node-modules DIR', ['kimi', 'node-modules']);
const KIMI = args.kimi;
const SPEC = ['--speculative-config',
              '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'];
const BIAS = { 3: 40, 17: 40, 29: 40 };

function prompt(seed) {   // a 7-token unit, four times
    const unit = Array.from({ length: 7 }, (_, i) => 40 + ((seed * 131 + i * 17) % 500));
    return [].concat(unit, unit, unit, unit);
}
function body(seed, greedy, extra = {}) {
    return { model: MODEL_NAME, prompt: prompt(seed), max_tokens: 40, logprobs: 2, logit_bias: BIAS, ignore_eos: true,
             ...(greedy ? { temperature: 0 } : { temperature: 0.8, seed: 5 }), ...extra };
}
function answer(r) {
    const c = r.choices[0];
    return { text: c.text, tokens: c.logprobs.tokens, logprobs: c.logprobs.token_logprobs, finish: c.finish_reason };
}
async function streamed(client, b) {
    let text = '';
    const tokens = [], logprobs = [];
    let finish = null;
    for await (const c of await client.completions.create({ ...b, stream: true })) {
        for (const ch of c.choices) {
            text += ch.text;
            if (ch.logprobs) {
                tokens.push(...ch.logprobs.tokens);
                logprobs.push(...ch.logprobs.token_logprobs);
            }
            if (ch.finish_reason) finish = ch.finish_reason;
        }
    }
    return { text, tokens, logprobs, finish };
}
async function metrics(srv) {
    const text = await (await fetch(srv.url + '/metrics')).text();
    const value = (name) => {
        const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
        return m ? Number(m[1]) : null;
    };
    return { value, text };
}

async function runPreset(OpenAI, preset) {
    const { tmp, modelDir } = makeTinyModel(KIMI, `kimi-spec-${preset}-`, preset);
    const started = [];
    try {
        const plain = await startServer(KIMI, modelDir, ['--threads', '2']);
        started.push(['plain', plain]);
        const spec = await startServer(KIMI, modelDir, ['--threads', '2', ...SPEC]);
        started.push(['speculating', spec]);
        // six state slots and 16 blocks of MLA cache (256 tokens) for six requests of 68 tokens:
        // they cannot all run at once, so some are preempted
        const sizes = /cache: \d+ state slots x ([\d.]+) KiB \(KDA\) \+ (\d+) blocks x 16 tokens \(\d+ tokens of MLA cache, ([\d.]+) MiB\)/
            .exec(plain.stderr);
        assert(sizes, `startup cache line: ${plain.stderr}`);
        const kib = 6 * Number(sizes[1]) + 16 * (Number(sizes[3]) * 1024 / Number(sizes[2]));
        const small = await startServer(KIMI, modelDir, ['--threads', '2', '--max-num-seqs', '6', '--max-model-len', '96',
                                                         '--cache-memory', String(kib / 1048576), ...SPEC]);
        started.push(['speculating, small cache', small]);
        const client = (s) => new OpenAI({ baseURL: s.url + '/v1', apiKey: 'x', maxRetries: 0, timeout: 60000 });
        const [cp, cs, cm] = [client(plain), client(spec), client(small)];

        await check(`${preset}: greedy and seeded, streamed and not, equal plain decoding`, async () => {
            for (const greedy of [true, false]) {
                for (const seed of [1, 2, 3]) {
                    const ref = answer(await cp.completions.create(body(seed, greedy)));
                    const got = answer(await cs.completions.create(body(seed, greedy)));
                    eq(got, ref, `${greedy ? 'greedy' : 'seeded'} prompt ${seed}`);
                    eq(await streamed(cs, body(seed, greedy)), ref, `streamed, ${greedy ? 'greedy' : 'seeded'} prompt ${seed}`);
                }
            }
            const m = await metrics(spec);
            assert(m.value('kimi:spec_decode_num_drafts_total') > 0, 'drafts counted');
            const acc = m.value('kimi:spec_decode_num_accepted_tokens_total');
            assert(acc > 0 && acc < m.value('kimi:spec_decode_num_draft_tokens_total'), `accepted ${acc}: some, not all`);
            assert(/kimi:spec_decode_num_accepted_tokens_per_pos_total\{position="3"\}/.test(m.text), 'per position');
            assert((await metrics(plain)).value('kimi:spec_decode_num_drafts_total') === null, 'no spec counters when off');
        });

        await check(`${preset}: six concurrent requests on a cache that preempts equal plain decoding`, async () => {
            const seeds = [11, 12, 13, 14, 15, 16];
            const refs = await Promise.all(seeds.map(async (s) => answer(await cp.completions.create(body(s, s % 2 === 0)))));
            const got = await Promise.all(seeds.map((s) => streamed(cm, body(s, s % 2 === 0))));
            for (let i = 0; i < seeds.length; ++i) eq(got[i], refs[i], `request ${seeds[i]}`);
            const m = await metrics(small);
            assert(m.value('kimi:num_preemptions_total') > 0, `the small cache must preempt (${fmt(m.value('kimi:num_preemptions_total'))})`);
            assert(m.value('kimi:spec_decode_num_accepted_tokens_total') > 0, 'and still accept drafts');
        });

        // a draft model: another random model of the preset, with the target's tokenizer
        const draftDir = path.join(tmp, 'draft');
        execFileSync(KIMI, ['make-model', '--preset', preset, '--seed', '2', '--out', draftDir], { stdio: 'pipe' });
        for (const f of ['tiktoken.model', 'tokenizer_config.json']) fs.copyFileSync(path.join(modelDir, f), path.join(draftDir, f));
        const draft = await startServer(KIMI, modelDir, ['--threads', '2', '--speculative-config',
            JSON.stringify({ method: 'draft_model', model: draftDir, num_speculative_tokens: 3 })]);
        started.push(['draft model', draft]);
        const cd = client(draft);
        await check(`${preset}: a draft model: greedy equals plain decoding, seeded is reproducible`, async () => {
            assert(/the draft model's/.test(draft.stderr), `the cache line counts the draft: ${draft.stderr}`);
            for (const seed of [1, 2]) {
                const ref = answer(await cp.completions.create(body(seed, true)));
                eq(answer(await cd.completions.create(body(seed, true))), ref, `greedy prompt ${seed}`);
                eq(await streamed(cd, body(seed, true)), ref, `streamed greedy prompt ${seed}`);
                const once = answer(await cd.completions.create(body(seed, false)));
                eq(answer(await cd.completions.create(body(seed, false))), once, `seeded prompt ${seed}, twice`);
                eq(await streamed(cd, body(seed, false)), once, `seeded prompt ${seed}, streamed`);
            }
            const chat = { model: MODEL_NAME, messages: [{ role: 'user', content: 'Repeat: one two three one two three' }],
                           max_tokens: 24, temperature: 0, logit_bias: BIAS };
            const want = (await cp.chat.completions.create(chat)).choices[0].message.content;
            eq((await cd.chat.completions.create(chat)).choices[0].message.content, want, 'chat completion');
            const m = await metrics(draft);
            assert(m.value('kimi:spec_decode_num_drafts_total') > 0, 'drafts counted');
            assert(m.value('kimi:spec_decode_num_accepted_tokens_total') <= m.value('kimi:spec_decode_num_draft_tokens_total'),
                   'accepted <= drafted');
        });

        // issue 56: a seeded n = 2 (choice k seeded seed + k) beside greedy fillers came back
        // several ways under a draft model; now every proposer's seeded output is plain decoding's
        await check(`${preset}: seeded n = 2 beside greedy fillers equals plain decoding (ngram and draft model)`, async () => {
            const all = (r) => [...r.choices].sort((a, b) => a.index - b.index).map((c) => ({
                text: c.text, tokens: c.logprobs.tokens, logprobs: c.logprobs.token_logprobs, finish: c.finish_reason }));
            const pair = { ...body(4, false), n: 2, seed: 11 };
            const ref = all(await cp.completions.create(pair));
            eq(ref.length, 2, 'two choices');
            for (const [name, c] of [['ngram', cs], ['draft model', cd]]) {
                eq(all(await c.completions.create(pair)), ref, `${name}: alone`);
                for (let round = 0; round < 2; ++round) {
                    const fillers = [21, 22, 23, 24].map((s) => c.completions.create(body(s, true)));
                    const got = c.completions.create(pair);
                    eq(all(await got), ref, `${name}: beside four greedy fillers, round ${round}`);
                    await Promise.all(fillers);
                }
            }
        });

        await check(`${preset}: a stream cancelled mid-verification frees its cache`, async () => {
            const ac = new AbortController();
            let n = 0;
            try {
                for await (const c of await cs.completions.create({ ...body(21, true), max_tokens: 60, stream: true },
                                                                  { signal: ac.signal })) {
                    n += c.choices.length;
                    if (n === 5) ac.abort();
                }
            } catch (_) { /* aborted */ }
            const until = Date.now() + 10000;
            for (;;) {
                const m = await metrics(spec);
                if (m.value('kimi:num_requests_running') === 0 && m.value('kimi:cache_blocks_used') === 0 &&
                    m.value('kimi:state_slots_used') === 0) break;
                assert(Date.now() < until, `still held after the cancel: ${m.text.split('\n').filter((l) => /running|_used /.test(l)).join('; ')}`);
                await new Promise((r) => setTimeout(r, 50));
            }
            const again = answer(await cs.completions.create(body(21, true)));
            eq(again, answer(await cp.completions.create(body(21, true))), 'served the same after the cancel');
        });
    } finally {
        for (const [name, s] of started) await checkShutdown(`${preset} ${name} server`, s);
        fs.rmSync(tmp, { recursive: true, force: true });
    }
}

async function main() {
    const OpenAI = (await importOpenAI(args['node-modules'])).default;
    const t0 = Date.now();
    for (const preset of ['tiny', 'k3-tiny']) await runPreset(OpenAI, preset);
    return report(t0);
}

runMain(main);
