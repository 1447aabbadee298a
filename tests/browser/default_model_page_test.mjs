// The chat page with the default model (models/kimi-k3-mini, trained by tools/train_default/),
// as `make serve` serves it, driven like a user in Debian's chromium (puppeteer-core): greedy
// (temperature 0 in the settings), it
//   * answers "What is 37 + 45?" with 82, its column-by-column reasoning in the Reasoning box;
//   * with the calculator declared (the settings' button), calls it for "What is 12 * 7?" with
//     valid JSON arguments, and after "Add tool result" (84) answers 84;
//   * names the colour of an attached red image;
//   * answers "Compute 81 - 9." with 72.
// Its screenshots are the project's (docs/img/chat-*.png): real replies of this model, desktop
// and phone width, light and dark, written to --shots DIR.
//   node tests/browser/default_model_page_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules [--shots DIR]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cliArgs, fmt, assert, eq, check, report, runMain, startServer, checkShutdown, png } from '../server/common.mjs';

const args = cliArgs('usage: default_model_page_test.mjs --kimi PATH --node-modules DIR [--shots DIR]', ['kimi', 'node-modules']);
const KIMI = args.kimi;
const SHOTS = args.shots || null;
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MODEL_DIR = path.join(REPO, 'models', 'kimi-k3-mini');
const NAME = 'kimi-k3-mini';

async function launch() {
    const entry = path.join(args['node-modules'], 'puppeteer-core', 'lib', 'esm', 'puppeteer', 'puppeteer-core.js');
    const { default: puppeteer } = await import(pathToFileURL(entry).href);
    return puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true,
                              args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

const idle = (page) => page.waitForFunction(() => !document.getElementById('send').hidden, { timeout: 120000 });
const answers = (page) => page.$$eval('.message.assistant .markdown', (els) => els.map((e) => e.textContent.trim()));

// A new conversation, greedy.
async function newGreedyChat(page) {
    await page.click('#new-chat');
    await page.evaluate(() => {
        const t = document.getElementById('temperature');
        t.value = '0';
        t.dispatchEvent(new Event('change'));
    });
}

async function ask(page, text) {
    await page.click('#input');
    await page.type('#input', text);
    await page.keyboard.press('Enter');
    await idle(page);
}

async function shot(page, name, width, height, scheme) {
    if (!SHOTS) return;
    fs.mkdirSync(SHOTS, { recursive: true });
    if (await page.$eval('#settings', (e) => !e.hidden)) await page.click('#toggle-settings');
    await page.setViewport({ width, height });
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: scheme }]);
    // the reasoning open, and the conversation scrolled to its end
    await page.$$eval('.message.assistant details.reasoning', (ds) => ds.forEach((d) => { d.open = true; }));
    await page.$eval('#messages', (m) => { m.scrollTop = m.scrollHeight; });
    await page.screenshot({ path: path.join(SHOTS, `chat-${name}.png`) });
    await page.setViewport({ width: 1280, height: 800 });
}

async function main() {
    const t0 = Date.now();
    const browser = await launch();
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kimi-default-page-'));
    let srv = null;
    try {
        srv = await startServer(KIMI, MODEL_DIR, ['--threads', '2'], NAME);
        const errors = [];
        const page = await browser.newPage();
        page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
        page.on('pageerror', (e) => errors.push(String(e)));
        page.on('dialog', (d) => d.accept(page.nextPrompt || ''));
        await page.setViewport({ width: 1280, height: 800 });
        await page.goto(srv.url + '/', { waitUntil: 'networkidle0' });

        await check('the page names the default model', async () => {
            eq(await page.$eval('#model-name', (e) => e.textContent), NAME, 'model name');
        });
        await check('"What is 37 + 45?": 82, the reasoning column by column', async () => {
            await newGreedyChat(page);
            await ask(page, 'What is 37 + 45?');
            eq((await answers(page)).at(-1), '82', 'the answer');
            const reasoning = await page.$eval('.message.assistant details.reasoning', (d) => d.textContent);
            assert(/ones 7\+5=12/.test(reasoning), `reasoning: ${fmt(reasoning)}`);
            await shot(page, 'desktop-light', 1280, 800, 'light');
        });
        await check('"What is 12 * 7?" with the calculator declared: a call, then 84 after the result', async () => {
            await newGreedyChat(page);
            await page.click('#toggle-settings');
            await page.click('#add-calculator');
            await page.click('#toggle-settings');
            await ask(page, 'What is 12 * 7?');
            const card = await page.$eval('.message.assistant .tool-call', (c) => c.textContent);
            assert(card.includes('calculator'), `tool call card: ${fmt(card)}`);
            const argsText = await page.$eval('.message.assistant .tool-call pre', (p) => p.textContent);
            eq(JSON.parse(argsText), { expression: '12 * 7' }, 'the call\'s arguments');
            page.nextPrompt = '84';
            await page.click('.message.assistant .tool-call button');
            await idle(page);
            eq((await answers(page)).at(-1), '84', 'the answer after the result');
            await shot(page, 'desktop-dark', 1280, 800, 'dark');
        });
        await check('"What colour is this image?" with a red image: red', async () => {
            await newGreedyChat(page);
            const file = path.join(tmp, 'red.png');
            fs.writeFileSync(file, png(96, 64, () => [220, 30, 30]));
            await (await page.$('#attach')).uploadFile(file);
            await page.waitForSelector('#attachments img.thumb');
            await ask(page, 'What colour is this image?');
            eq((await answers(page)).at(-1), 'Red.', 'the answer');
            await shot(page, 'phone-light', 390, 844, 'light');
        });
        await check('"Compute 81 - 9.": 72', async () => {
            await newGreedyChat(page);
            await ask(page, 'Compute 81 - 9.');
            eq((await answers(page)).at(-1), '72', 'the answer');
            await shot(page, 'phone-dark', 390, 844, 'dark');
        });
        await check('no console errors', async () => eq(errors, [], 'console errors'));
    } finally {
        await browser.close();
        if (srv) await checkShutdown(NAME, srv);
        fs.rmSync(tmp, { recursive: true, force: true });
    }
    return report(t0);
}

runMain(main);
