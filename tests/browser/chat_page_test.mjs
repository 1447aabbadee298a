// Browser tests of the chat page at `/` (label `browser`): Debian's chromium, headless, driven
// by puppeteer-core, against `kimi-cpp serve` on the tiny Kimi Linear and K3 models.
//   node tests/browser/chat_page_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
// What it drives: the page loads without console errors; a reply streams in (its text grows
// over several frames) with its figures; Stop aborts it (the server's /metrics shows nothing
// running and /health stays ok); Regenerate gives a new reply; conversations survive a
// reload; the JSON-schema box yields JSON; K3's reasoning shows live and collapses once the
// answer starts (a stubbed SSE reply); a corpus of hostile replies renders inert; the API-key
// prompt works and a wrong key reads as 401 in words. (The screenshots are the default model's:
// default_model_page_test.mjs.)
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cliArgs, fmt, assert, eq, check, report, runMain, makeTinyModel, startServer, checkShutdown, png } from '../server/common.mjs';

const args = cliArgs('usage: chat_page_test.mjs --kimi PATH --node-modules DIR', ['kimi', 'node-modules']);
const KIMI = args.kimi;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));


// A new conversation (its prompts stay short), whose chat requests ask the server to ignore EOS
// until the returned function is called: a random model's reply runs until Stop or Esc ends it.
async function ignoreEos(page) {
    await page.click('#new-chat');
    const onRequest = (req) => {
        if (req.method() === 'POST' && req.url().endsWith('/v1/chat/completions')) {
            req.continue({ postData: JSON.stringify({ ...JSON.parse(req.postData()), ignore_eos: true }) });
        } else {
            req.continue();
        }
    };
    await page.setRequestInterception(true);
    page.on('request', onRequest);
    return async () => {
        page.off('request', onRequest);
        await page.setRequestInterception(false);
    };
}
async function launch() {
    const entry = path.join(args['node-modules'], 'puppeteer-core', 'lib', 'esm', 'puppeteer', 'puppeteer-core.js');
    const { default: puppeteer } = await import(pathToFileURL(entry).href);
    return puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true,
                              args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

async function openPage(browser, url, errors) {
    const page = await browser.newPage();
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('dialog', (d) => d.accept(page.nextPrompt || ''));
    await page.goto(url, { waitUntil: 'networkidle0' });
    return page;
}

const assistantText = (page) => page.$$eval('.message.assistant .markdown', (els) => els.map((e) => e.textContent));
// a whole reply: its reasoning (K3) and its answer
const replyText = (page) => page.$$eval('.message.assistant', (els) => els.map((e) => e.textContent));
const idle = (page) => page.waitForFunction(() => !document.getElementById('send').hidden, { timeout: 60000 });

async function sendMessage(page, text) {
    await page.click('#input');
    await page.type('#input', text);
    await page.keyboard.press('Enter');
}

async function metric(url, name) {
    const text = await (await fetch(url + '/metrics')).text();
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
}

// A stubbed SSE reply: the page's request to /v1/chat/completions is answered with these deltas.
function sse(deltas) {
    const chunks = deltas.map((d) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: d }] })}\n\n`);
    chunks.push(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 2 } } })}\n\n`);
    return chunks.join('') + 'data: [DONE]\n\n';
}

async function stubbed(page, deltas, fn) {
    await page.setRequestInterception(true);
    const handler = (req) => {
        if (req.url().endsWith('/v1/chat/completions'))
            req.respond({ status: 200, contentType: 'text/event-stream', body: sse(deltas) });
        else req.continue();
    };
    page.on('request', handler);
    try { await fn(); } finally { page.off('request', handler); await page.setRequestInterception(false); }
}

const XSS = [
    '<script>window.__pwned = 1</script>',
    '<img src=x onerror="window.__pwned = 2">',
    '[click](javascript:window.__pwned=3)',
    '<a href="javascript:window.__pwned=4">x</a>',
    '```html\n<script>window.__pwned = 5</script>\n```',
    '<svg onload="window.__pwned = 6"></svg>',
    '<iframe src="javascript:window.__pwned=7"></iframe>',
    '<div style="background:url(javascript:alert(1))" onclick="window.__pwned=8">d</div>',
];

async function main() {
    const t0 = Date.now();
    const browser = await launch();
    const made = [];
    try {
        for (const preset of ['tiny', 'k3-tiny']) {
            const { tmp, modelDir } = makeTinyModel(KIMI, 'kimi-browser-', preset);
            made.push(tmp);
            const srv = await startServer(KIMI, modelDir, ['--threads', '2']);
            const errors = [];
            const page = await openPage(browser, srv.url + '/', errors);
            await check(`${preset}: the page loads with no console errors`, async () => {
                eq(await page.$eval('#model-name', (e) => e.textContent), 'kimi-tiny', 'model name');
                eq(errors.length, 0, `console errors: ${fmt(errors)}`);
            });
            await check(`${preset}: a reply streams in, with its figures`, async () => {
                await page.evaluate(() => { document.getElementById('max_tokens').value = '200'; document.getElementById('max_tokens').dispatchEvent(new Event('change')); });
                await sendMessage(page, 'Hello there');
                const seen = new Set();
                for (let i = 0; i < 40 && seen.size < 3; ++i) {
                    const t = await page.$$eval('.message.assistant', (els) => (els.at(-1) || { textContent: '' }).textContent.length);
                    seen.add(t);
                    await sleep(15);
                }
                await idle(page);
                assert(seen.size >= 2, `the reply did not grow over frames: ${fmt([...seen])}`);
                const figures = await page.$eval('.message.assistant .figures', (e) => e.textContent);
                assert(/prompt tokens/.test(figures) && /TTFT \d+ ms/.test(figures), `figures: ${figures}`);
            });
            await check(`${preset}: Stop aborts the reply; the server cancels it and stays healthy`, async () => {
                await page.evaluate(() => { document.getElementById('max_tokens').value = '3000'; document.getElementById('max_tokens').dispatchEvent(new Event('change')); });
                const restore = await ignoreEos(page);   // a random model may end its reply on its own first
                let stopped = false;
                for (let attempt = 0; attempt < 5 && !stopped; ++attempt) {
                    await sendMessage(page, 'Write a lot');
                    await page.waitForFunction(() => !document.getElementById('stop').hidden, { timeout: 10000 }).catch(() => {});
                    stopped = await page.evaluate(() => {
                        const b = document.getElementById('stop');
                        if (b.hidden) return false;
                        b.click();
                        return true;
                    });
                    await idle(page);
                }
                await restore();
                assert(stopped, 'every reply ended before Stop could be pressed');
                let running = NaN;
                for (let i = 0; i < 50; ++i) {
                    running = await metric(srv.url, 'kimi:num_requests_running');
                    if (running === 0) break;
                    await sleep(50);
                }
                eq(running, 0, 'requests running after Stop');
                eq((await fetch(srv.url + '/health')).status, 200, '/health');
            });
            await check(`${preset}: Esc stops a reply too`, async () => {
                const restore = await ignoreEos(page);   // the random model must not end its reply before Esc
                let stopped = false;
                for (let attempt = 0; attempt < 5 && !stopped; ++attempt) {
                    const before = await page.$$eval('.message.assistant', (els) => els.length);
                    await sendMessage(page, 'Keep going');
                    await page.waitForFunction(() => !document.getElementById('stop').hidden, { timeout: 10000 }).catch(() => {});
                    stopped = await page.$eval('#stop', (b) => !b.hidden);
                    if (stopped) await page.keyboard.press('Escape');
                    await idle(page);
                    eq(await page.$$eval('.message.assistant', (els) => els.length), before + 1, 'one reply per message');
                }
                await restore();
                assert(stopped, 'every reply ended before Esc could be pressed');
                eq(await page.$eval('#stop', (b) => b.hidden), true, 'Stop hidden after Esc');
            });
            await check(`${preset}: Regenerate gives a new reply; conversations survive a reload`, async () => {
                await page.evaluate(() => { document.getElementById('max_tokens').value = '40'; document.getElementById('max_tokens').dispatchEvent(new Event('change')); });
                await sendMessage(page, 'Once more');
                await idle(page);
                const before = (await replyText(page)).at(-1);
                await page.$$eval('.message.assistant button', (bs) => bs.find((b) => b.textContent === 'Regenerate').click());
                await sleep(50);
                await idle(page);
                const after = (await replyText(page)).at(-1);
                assert(after !== before, 'the regenerated reply is the same text (temperature 0.7)');
                const n = await page.$$eval('.message', (els) => els.length);
                await page.reload({ waitUntil: 'networkidle0' });
                eq(await page.$$eval('.message', (els) => els.length), n, 'messages after a reload');
                eq((await replyText(page)).at(-1), after, 'the last reply after a reload');
            });
            await check(`${preset}: the JSON-schema box yields JSON`, async () => {
                await page.click('#new-chat');
                await page.click('#toggle-settings');
                await page.evaluate(() => {
                    const s = document.getElementById('schema');
                    s.value = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}';
                    s.dispatchEvent(new Event('change'));
                    document.getElementById('max_tokens').value = '60';
                    document.getElementById('max_tokens').dispatchEvent(new Event('change'));
                    const think = document.getElementById('thinking');   // K3: the answer channel at once
                    think.checked = false;
                    think.dispatchEvent(new Event('change'));
                });
                await sendMessage(page, 'A number please');
                await idle(page);
                const text = (await assistantText(page)).at(-1);
                const v = JSON.parse(text);
                assert(Number.isInteger(v.n), `not the schema's JSON: ${text}`);
            });
            if (preset === 'k3-tiny') {
                await check('k3-tiny: reasoning shows live, then collapses once the answer starts', async () => {
                    await page.click('#new-chat');
                    await stubbed(page, [{ role: 'assistant', reasoning_content: 'Let me think.' },
                        { content: 'The answer is **42**.\n\n- six times seven\n- the meaning of it all\n\n```python\nprint(6 * 7)\n```' }], async () => {
                        await sendMessage(page, 'Question');
                        await idle(page);
                    });
                    const r = await page.$eval('.message.assistant details.reasoning', (d) => ({ open: d.open, text: d.textContent }));
                    assert(r.text.includes('Let me think.'), `reasoning: ${fmt(r)}`);
                    eq(r.open, false, 'reasoning collapsed once the answer started');
                    eq(await page.$eval('.message.assistant .markdown strong', (e) => e.textContent), '42', 'Markdown');
                    const fig = await page.$eval('.message.assistant .figures', (e) => e.textContent);
                    assert(fig.includes('2 cached'), `figures: ${fig}`);
                });
            }
            await check(`${preset}: an attached image goes with the message (K3) or is refused in words (Kimi Linear)`, async () => {
                await page.click('#new-chat');
                const file = path.join(made.at(-1), 'red.png');
                fs.writeFileSync(file, png(60, 40, (x, y) => [200, (x * 4) & 255, (y * 6) & 255]));
                await (await page.$('#attach')).uploadFile(file);
                await page.waitForSelector('#attachments img.thumb');
                await page.evaluate(() => { document.getElementById('max_tokens').value = '8'; document.getElementById('max_tokens').dispatchEvent(new Event('change')); });
                await sendMessage(page, 'What is this?');
                await idle(page);
                eq(await page.$$eval('#attachments img', (els) => els.length), 0, 'attachments cleared after sending');
                assert(await page.$('.message.user img.thumb'), 'no thumbnail in the history');
                const err = await page.$eval('#error', (e) => (e.hidden ? '' : e.textContent));
                if (preset === 'k3-tiny') {
                    eq(err, '', 'an error with an image on K3');
                    const fig = await page.$eval('.message.assistant .figures', (e) => e.textContent);
                    // 60x40 pads to 84x56: 3 x 2 image tokens besides the text
                    assert(/^\d+ prompt tokens/.test(fig), `figures: ${fig}`);
                } else {
                    assert(/400/.test(err) && /image/.test(err), `the refusal in words: ${fmt(err)}`);
                    errors.length = 0;   // the browser reports the 400 on the console
                }
            });
            await check(`${preset}: hostile replies render inert`, async () => {
                await page.click('#new-chat');
                await stubbed(page, [{ role: 'assistant', content: XSS.join('\n\n') }], async () => {
                    await sendMessage(page, 'x');
                    await idle(page);
                });
                await sleep(200);
                eq(await page.evaluate(() => window.__pwned), undefined, 'a payload ran');
                const bad = await page.$$eval('.message.assistant *', (els) => els.filter((e) =>
                    ['SCRIPT', 'IFRAME'].includes(e.tagName) || [...e.attributes].some((a) => a.name.startsWith('on') || a.name === 'style' ||
                    /^\s*javascript:/i.test(a.value))).map((e) => e.outerHTML));
                eq(bad.length, 0, `dangerous elements reached the DOM: ${fmt(bad)}`);
                // what the Content-Security-Policy refused is reported on the console: defence in depth
                const other = errors.filter((e) => !/Content Security Policy/.test(e));
                eq(other.length, 0, `console errors: ${fmt(other)}`);
            });
            await page.close();
            await checkShutdown(preset, srv);
        }
        // --api-key: the page asks for the key; a wrong key reads as 401 in words
        const { tmp, modelDir } = makeTinyModel(KIMI, 'kimi-browser-key-', 'tiny');
        made.push(tmp);
        const srv = await startServer(KIMI, modelDir, ['--threads', '1', '--api-key', 'sesame']);
        const errors = [];
        const page = await openPage(browser, srv.url + '/', errors);
        await check('--api-key: a wrong key is a 401 in words; the right one is kept for the session', async () => {
            page.nextPrompt = 'wrong';
            await sendMessage(page, 'hi');
            await idle(page);
            const err = await page.$eval('#error', (e) => (e.hidden ? '' : e.textContent));
            assert(/401/.test(err), `error shown: ${fmt(err)}`);
            page.nextPrompt = 'sesame';
            await sendMessage(page, 'hi again');
            await idle(page);
            const err2 = await page.$eval('#error', (e) => (e.hidden ? '' : e.textContent));
            assert(/401/.test(err2), `the wrong key again: ${fmt(err2)}`);
            // the prompt after that 401 stored the right key: the next message goes through
            await sendMessage(page, 'third');
            await idle(page);
            eq(await page.$eval('#error', (e) => e.hidden), true, 'no error with the right key');
            assert(!page.url().includes('sesame'), 'the key is not in the URL');
        });
        await page.close();
        await checkShutdown('api-key server', srv);
    } finally {
        await browser.close();
        for (const d of made) fs.rmSync(d, { recursive: true, force: true });
    }
    return report(t0);
}

runMain(main);
