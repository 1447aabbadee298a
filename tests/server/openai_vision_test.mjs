// End-to-end test of Kimi-K3 images behind `kimi-cpp serve`, driven by the stock `openai` npm
// client: a data-URL image in a chat (stream and non-stream agree), two images in one
// message (prompt_tokens == /tokenize, the pad tokens counted), an image in an earlier turn
// served from the prefix cache (cached_tokens > 0) while a different image of the same size
// misses, file:// URLs only under --allowed-local-media-path, and the 400 cases (http URLs,
// corrupt and truncated images, too many images, a model without a vision tower).
//
//   node tests/server/openai_vision_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { MODEL_NAME, cliArgs, fmt, assert, eq, check, report, runMain, makeTinyModel, startServer, checkShutdown, importOpenAI, png } from './common.mjs';

const args = cliArgs('usage: openai_vision_test.mjs --kimi PATH --node-modules DIR', ['kimi', 'node-modules']);
const KIMI = args.kimi;
const NODE_MODULES = args['node-modules'];

const dataUrl = (bytes) => 'data:image/png;base64,' + bytes.toString('base64');
const imagePart = (url) => ({ type: 'image_url', image_url: { url } });

async function main() {
    const mod = await importOpenAI(NODE_MODULES);
    const OpenAI = mod.default;
    const { BadRequestError } = mod;
    const { tmp, modelDir } = makeTinyModel(KIMI, 'kimi-openai-vision-', 'k3-tiny');
    const media = path.join(tmp, 'media');
    fs.mkdirSync(media);
    const t0 = Date.now();
    const servers = [];
    try {
        const srv = await startServer(KIMI, modelDir, ['--threads', '2', '--allowed-local-media-path', media,
                                                        '--limit-mm-per-prompt', 'image=2']);
        servers.push(srv);
        const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'x', maxRetries: 0, timeout: 60000 });
        const red = png(90, 60, (x, y) => [200, (x * 3) & 255, (y * 5) & 255]);
        const blue = png(90, 60, (x, y) => [(y * 7) & 255, 40, 220]);   // same size, other pixels
        const tall = png(40, 130, (x, y) => [(x * y) & 255, 100, 0]);
        const base = { model: MODEL_NAME, max_tokens: 12, temperature: 0, ignore_eos: true };
        const tokenize = async (body) => {
            const r = await fetch(srv.url + '/tokenize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                           body: JSON.stringify({ model: MODEL_NAME, ...body }) });
            return r.json();
        };

        await check('startup says images are on', async () => {
            assert(/images on/.test(srv.stderr), `stderr: ${fmt(srv.stderr.slice(-600))}`);
        });
        const one = [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, imagePart(dataUrl(red))] }];
        let first = null;
        await check('a data-URL image: stream == non-stream, the pad tokens counted', async () => {
            first = await client.chat.completions.create({ ...base, messages: one });
            const text = await tokenize({ messages: [{ role: 'user', content: 'What is in this picture?' }] });
            const withImage = await tokenize({ messages: one });
            eq(withImage.count, first.usage.prompt_tokens, '/tokenize count == prompt_tokens');
            // 90x60 → 84x56 after padding to 28: (56/28)·(84/28)... padded 112x84 → 4·3 = 12 merged tokens
            assert(first.usage.prompt_tokens > text.count + 12, `prompt_tokens ${first.usage.prompt_tokens} vs text ${text.count}`);
            let content = '', reasoning = '';
            for await (const c of await client.chat.completions.create({ ...base, messages: one, stream: true })) {
                for (const ch of c.choices) {
                    if (typeof ch.delta.content === 'string') content += ch.delta.content;
                    if (typeof ch.delta.reasoning_content === 'string') reasoning += ch.delta.reasoning_content;
                }
            }
            eq(content, first.choices[0].message.content ?? '', 'streamed content');
            eq(reasoning, first.choices[0].message.reasoning_content ?? '', 'streamed reasoning');
        });
        await check('two images of different sizes in one message', async () => {
            const two = [{ role: 'user', content: [imagePart(dataUrl(red)), { type: 'text', text: 'and' }, imagePart(dataUrl(tall))] }];
            const r = await client.chat.completions.create({ ...base, messages: two });
            eq((await tokenize({ messages: two })).count, r.usage.prompt_tokens, '/tokenize count');
            eq(r.usage.completion_tokens, 12, 'completion_tokens');
        });
        await check('an image in an earlier turn: a prefix-cache hit; another image of the same size misses', async () => {
            const turn2 = [...one, { role: 'assistant', content: first.choices[0].message.content ?? '' },
                           { role: 'user', content: 'Tell me more.' }];
            const r = await client.chat.completions.create({ ...base, messages: turn2 });
            const cached = r.usage.prompt_tokens_details.cached_tokens;
            assert(cached > 0, `cached_tokens ${cached}`);
            const other = [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, imagePart(dataUrl(blue))] }];
            const ids = (await tokenize({ messages: other })).tokens;
            const firstPad = ids.findIndex((t, i) => i > 0 && ids.slice(i, i + 12).every((u) => u === ids[i]));
            const miss = await client.chat.completions.create({ ...base, messages: other });
            const again = await client.chat.completions.create({ ...base, messages: one });
            assert(miss.usage.prompt_tokens_details.cached_tokens <= firstPad,
                   `a different image hit the cache past its first pad token: cached ${miss.usage.prompt_tokens_details.cached_tokens}, first pad ${firstPad}`);
            assert(again.usage.prompt_tokens_details.cached_tokens > firstPad,
                   `the same image again: cached ${again.usage.prompt_tokens_details.cached_tokens}, first pad ${firstPad}`);
            eq(again.choices[0].message.content, first.choices[0].message.content, 'the same reply from the cache');
            const metrics = await (await fetch(srv.url + '/metrics')).text();
            const value = (name) => Number((metrics.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1]);
            assert(value('kimi:mm_images_encoded_total') >= 3, `images encoded: ${value('kimi:mm_images_encoded_total')}`);
            assert(value('kimi:mm_encoder_cache_hits_total') >= 1, `encoder cache hits: ${value('kimi:mm_encoder_cache_hits_total')}`);
            assert(value('kimi:mm_encoder_cache_images') >= 3, `cached images: ${value('kimi:mm_encoder_cache_images')}`);
        });
        await check('file:// URLs under --allowed-local-media-path', async () => {
            fs.writeFileSync(path.join(media, 'red.png'), red);
            const viaFile = [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, imagePart('file://' + path.join(media, 'red.png'))] }];
            const r = await client.chat.completions.create({ ...base, messages: viaFile });
            eq(r.choices[0].message.content, first.choices[0].message.content, 'a file:// image == the same data: image');
        });
        const bad = async (what, messages, needle) => {
            let err = null;
            try { await client.chat.completions.create({ ...base, messages }); } catch (e) { err = e; }
            assert(err instanceof BadRequestError, `${what}: ${err && err.constructor.name} ${err && err.message}`);
            eq(err.status, 400, `${what}: status`);
            eq(err.param, 'messages', `${what}: param`);
            if (needle) assert(err.message.includes(needle), `${what}: message ${fmt(err.message)}`);
        };
        await check('bad images → 400 naming the reason; the server goes on', async () => {
            const msg = (part) => [{ role: 'user', content: [part] }];
            await bad('an http URL', msg(imagePart('https://example.com/a.png')), 'does not fetch URLs');
            await bad('corrupt bytes', msg(imagePart('data:image/png;base64,' + Buffer.from('not an image at all').toString('base64'))));
            await bad('a truncated PNG', msg(imagePart(dataUrl(red.subarray(0, 60)))));
            await bad('bad base64', msg(imagePart('data:image/png;base64,@@@@')), 'base64');
            await bad('a file outside the allowed path', msg(imagePart('file:///etc/hostname')), 'outside');
            await bad('three images over --limit-mm-per-prompt image=2',
                      [{ role: 'user', content: [imagePart(dataUrl(red)), imagePart(dataUrl(red)), imagePart(dataUrl(red))] }], 'image=N');
            const r = await client.chat.completions.create({ ...base, messages: one, max_tokens: 2 });
            eq(r.choices.length, 1, 'served after the errors');
        });
        await checkShutdown('server', srv);
        servers.pop();

        // A Kimi Linear model and a K3 export without its tower answer images with a 400.
        const linear = path.join(tmp, 'linear');
        execFileSync(KIMI, ['make-model', '--preset', 'tiny', '--seed', '1', '--out', linear, '--quiet'], { stdio: 'pipe' });
        const noTower = path.join(tmp, 'k3-text');
        execFileSync(KIMI, ['make-model', '--preset', 'k3-tiny', '--seed', '1', '--out', noTower, '--quiet',
                            '--set', 'vision_config=null'], { stdio: 'pipe' });
        for (const [label, dir, needle] of [['Kimi Linear', linear, 'no vision tower'], ['K3 without vision_config', noTower, 'vision']]) {
            const s = await startServer(KIMI, dir, ['--threads', '1']);
            servers.push(s);
            const c = new OpenAI({ baseURL: s.url + '/v1', apiKey: 'x', maxRetries: 0, timeout: 60000 });
            await check(`${label}: an image part is a 400`, async () => {
                let err = null;
                try { await c.chat.completions.create({ ...base, messages: one }); } catch (e) { err = e; }
                assert(err instanceof BadRequestError && err.status === 400, `${label}: ${err && err.message}`);
                assert(err.message.includes(needle), `${label}: message ${fmt(err.message)}`);
            });
            await checkShutdown(label, s);
            servers.pop();
        }
    } finally {
        for (const s of servers) await checkShutdown('server', s);
        fs.rmSync(tmp, { recursive: true, force: true });
    }
    return report(t0);
}

runMain(main);
