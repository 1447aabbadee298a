// Shared by the Node server tests (openai_client_test.mjs, concurrency_test.mjs): argument
// parsing, a tiny check harness, the random tiny model, and starting / stopping `kimi-cpp serve`.
// Importing this module installs handlers that kill every started server when the process exits.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import readline from 'node:readline';
import zlib from 'node:zlib';

export const MODEL_NAME = 'kimi-tiny';

// ---------------------------------------------------------------- arguments
// `--name value` and `--name=value` pairs into an object.
export function parseArgs(argv) {
    const out = {};
    for (let i = 0; i < argv.length; ++i) {
        const a = argv[i];
        if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
        const eq = a.indexOf('=');
        if (eq > 0) out[a.slice(2, eq)] = a.slice(eq + 1);
        else out[a.slice(2)] = argv[++i];
    }
    return out;
}
// The command line's arguments; prints usage and exits 2 when one of `required` is missing.
export function cliArgs(usage, required) {
    const args = parseArgs(process.argv.slice(2));
    if (required.some((k) => !args[k])) {
        console.error(usage);
        process.exit(2);
    }
    return args;
}

// ---------------------------------------------------------------- tiny harness
let nPass = 0;
const failures = [];
export function fmt(v) {
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s.length > 400 ? s.slice(0, 400) + '…' : s;
}
export class CheckError extends Error {}
export function assert(cond, msg) {
    if (!cond) throw new CheckError(msg);
}
export function eq(got, want, msg) {
    const g = JSON.stringify(got), w = JSON.stringify(want);
    if (g !== w) throw new CheckError(`${msg}: got ${fmt(got)}, want ${fmt(want)}`);
}
// Two usage objects of the same prompt and output: equal token counts; cached_tokens (the
// prefix cache's share, which depends on what ran before) an integer in [0, prompt_tokens].
export function usageEq(got, want, msg) {
    const counts = (u) => ({ prompt_tokens: u?.prompt_tokens, completion_tokens: u?.completion_tokens, total_tokens: u?.total_tokens });
    eq(counts(got), counts(want), msg);
    for (const u of [got, want]) {
        const c = u.prompt_tokens_details?.cached_tokens;
        assert(Number.isInteger(c) && c >= 0 && c <= u.prompt_tokens, `${msg}: cached_tokens ${fmt(c)}`);
    }
}
export function near(got, want, tol, msg) {
    if (!(typeof got === 'number' && Math.abs(got - want) <= tol)) throw new CheckError(`${msg}: got ${got}, want ${want} ± ${tol}`);
}
// Counts a passed / failed check and prints its line.
function pass(line) {
    ++nPass;
    console.log(`ok    ${line}`);
}
function fail(name, why) {
    failures.push(name);
    console.log(`FAIL  ${name}: ${why}`);
}
// Runs one named check: it passes when fn returns, fails when it throws.
export async function check(name, fn) {
    const t0 = Date.now();
    try {
        await fn();
        pass(`${name}  (${Date.now() - t0} ms)`);
    } catch (e) {
        fail(name, e instanceof CheckError ? e.message : e && e.stack ? e.stack : e);
    }
}
// Prints the pass / fail totals (time since t0); true when nothing failed.
export function report(t0) {
    console.log(`\n${nPass} passed, ${failures.length} failed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    if (failures.length) console.log('failed: ' + failures.join('; '));
    return failures.length === 0;
}
// Runs the async main (which returns report()'s verdict) and exits 0 / 1.
export function runMain(main) {
    main().then((ok) => process.exit(ok ? 0 : 1), (e) => {
        console.error(e && e.stack ? e.stack : e);
        process.exit(1);
    });
}

// ---------------------------------------------------------------- model
// A random tiny model (seed 1; preset `tiny` or e.g. `k3-tiny`) in a new temporary folder:
// {tmp, modelDir}; the caller removes tmp.
export function makeTinyModel(kimi, tmpPrefix, preset = 'tiny') {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
    const modelDir = path.join(tmp, 'model');
    execFileSync(kimi, ['make-model', '--preset', preset, '--seed', '1', '--out', modelDir], { stdio: 'pipe' });
    return { tmp, modelDir };
}

// The stock `openai` client module installed under node_modules (its default export is the client class).
export async function importOpenAI(nodeModules) {
    const entry = ['openai/index.mjs', 'openai/index.js'].map((p) => path.join(nodeModules, p)).find((p) => fs.existsSync(p));
    if (!entry) throw new Error(`no openai client under ${nodeModules}`);
    return import(pathToFileURL(entry).href);
}

// The stock Anthropic client module (@anthropic-ai/sdk) installed under node_modules.
export async function importAnthropic(nodeModules) {
    const entry = ['@anthropic-ai/sdk/index.mjs', '@anthropic-ai/sdk/index.js'].map((p) => path.join(nodeModules, p)).find((p) => fs.existsSync(p));
    if (!entry) throw new Error(`no @anthropic-ai/sdk client under ${nodeModules}`);
    return import(pathToFileURL(entry).href);
}

// ---------------------------------------------------------------- a minimal PNG writer (RGB, 8-bit)
const CRC = new Int32Array(256).map((_, n) => {
    let c = n;
    for (let k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c;
});
function crc32(buf) {
    let c = -1;
    for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ -1) >>> 0;
}
function chunk(type, data) {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, 'ascii');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
    return Buffer.concat([head, data, crc]);
}
// w×h RGB image whose pixel (x, y) is f(x, y) → [r, g, b].
export function png(w, h, f) {
    const raw = Buffer.alloc((3 * w + 1) * h);
    for (let y = 0; y < h; ++y)
        for (let x = 0; x < w; ++x) raw.set(f(x, y), y * (3 * w + 1) + 1 + 3 * x);
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(w, 0);
    ihdr.writeUInt32BE(h, 4);
    ihdr.set([8, 2, 0, 0, 0], 8);
    return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr),
                          chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}
// ---------------------------------------------------------------- server process
const servers = [];
// `kimi serve` on a free port, served as `name`; resolves to {proc, url, stderr, exited} once
// /health answers 200.
export function startServer(kimi, modelDir, extra = [], name = MODEL_NAME) {
    return new Promise((resolve, reject) => {
        const argv = ['serve', '--model', modelDir, '--port', '0', '--served-model-name', name, ...extra];
        const proc = spawn(kimi, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
        const srv = { proc, url: null, stderr: '', exited: null };
        servers.push(srv);
        proc.stderr.on('data', (d) => {
            srv.stderr += d.toString();
            if (srv.stderr.length > 200000) srv.stderr = srv.stderr.slice(-100000);
        });
        const timer = setTimeout(() => reject(new Error(`server did not print its URL in 30 s; stderr:\n${srv.stderr}`)), 30000);
        proc.on('exit', (code, signal) => {
            srv.exited = { code, signal };
            clearTimeout(timer);
            if (!srv.url) reject(new Error(`server exited early (code ${code}, signal ${signal}); stderr:\n${srv.stderr}`));
        });
        const rl = readline.createInterface({ input: proc.stdout });
        rl.on('line', (line) => {
            const m = /serving '.*' at (http:\/\/[0-9.]+:\d+)/.exec(line);
            if (m && !srv.url) {
                srv.url = m[1];
                waitHealthy(srv).then(() => {
                    clearTimeout(timer);
                    resolve(srv);
                }, reject);
            }
        });
    });
}
async function waitHealthy(srv) {
    const until = Date.now() + 30000;
    for (;;) {
        try {
            const r = await fetch(srv.url + '/health');
            if (r.status === 200) return;
        } catch (_) { /* not yet */ }
        if (Date.now() > until) throw new Error('server never became healthy');
        await new Promise((r) => setTimeout(r, 50));
    }
}
// SIGTERM, then wait for the exit (SIGKILL after timeoutMs); resolves to {code, signal}.
export function stopServer(srv, timeoutMs = 15000) {
    return new Promise((resolve) => {
        if (srv.exited) return resolve(srv.exited);
        const timer = setTimeout(() => srv.proc.kill('SIGKILL'), timeoutMs);
        srv.proc.once('exit', (code, signal) => {
            clearTimeout(timer);
            resolve({ code, signal });
        });
        srv.proc.kill('SIGTERM');
    });
}
// Stops every started server that is still running.
export async function stopServers() {
    for (const s of servers) if (!s.exited) await stopServer(s);
}
// Stops srv and counts the shutdown as a check: a graceful shutdown exits 0.
export async function checkShutdown(name, srv) {
    const ex = await stopServer(srv);
    if (ex.code === 0) pass(`${name} shut down cleanly on SIGTERM (exit 0)`);
    else fail(`${name} shutdown`, `exit ${fmt(ex)}; stderr tail:\n${srv.stderr.slice(-2000)}`);
}
process.on('exit', () => {
    for (const s of servers) if (!s.exited) try { s.proc.kill('SIGKILL'); } catch (_) { /* gone */ }
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(1));
