// End-to-end test of the OpenAI Responses API (POST /v1/responses, GET / DELETE
// /v1/responses/{id}) behind `kimi-cpp serve`, driven by the stock `openai` npm client, on both
// chat formats (a Kimi Linear and a Kimi-K3 tiny model): plain and streamed replies (events in
// order with increasing sequence numbers, reassembling to the plain reply), a full tool round
// trip by previous_response_id and by explicit items (the same reply both ways), reasoning
// effort (K3), text.format json_schema, store / retrieve / delete, usage against the chat
// template's own render (`kimi-cpp chat-template --request`), and errors.
//
//   node tests/server/openai_responses_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { MODEL_NAME, cliArgs, fmt, assert, eq, check, report, runMain, makeTinyModel, startServer, checkShutdown, importOpenAI, png } from './common.mjs';

const args = cliArgs('usage: openai_responses_test.mjs --kimi PATH --node-modules DIR', ['kimi', 'node-modules']);
const KIMI = args.kimi;

const WEATHER = {
    type: 'function', name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false },
};

function templateIds(tmp, modelDir, body) {
    const file = path.join(tmp, 'request.json');
    fs.writeFileSync(file, JSON.stringify(body));
    return JSON.parse(execFileSync(KIMI, ['chat-template', '--tokenizer', modelDir, '--request', file, '--json'], { encoding: 'utf8' })).ids;
}

// Output items without their random ids and call ids (each reply's calls have ids of their own),
// and without the `parsed` the SDK's stream helper adds to parts.
const noIds = (output) => output.map(({ id, call_id, ...rest }) => {
    void id, void call_id;
    if (Array.isArray(rest.content)) rest.content = rest.content.map(({ parsed, ...p }) => { void parsed; return p; });
    return rest;
});

// The raw events of a streamed call: response.created first, response.completed last, sequence
// numbers 0, 1, 2, …, each item added before its deltas and done after them.
async function rawStream(client, params) {
    const events = [];
    for await (const ev of await client.responses.create({ ...params, stream: true })) events.push(ev);
    events.forEach((e, i) => eq(e.sequence_number, i, 'sequence_number'));
    eq(events[0].type, 'response.created', 'first event');
    eq(events[1].type, 'response.in_progress', 'second event');
    eq(events.at(-1).type, 'response.completed', 'last event');
    const open = new Set(), done = new Set();
    for (const e of events) {
        if (e.type === 'response.output_item.added') open.add(e.output_index);
        else if (e.type === 'response.output_item.done') { assert(open.has(e.output_index), 'done before added'); done.add(e.output_index); }
        else if (/delta$/.test(e.type)) assert(open.has(e.output_index) && !done.has(e.output_index), `${e.type} outside its item`);
    }
    eq(done.size, events.at(-1).response.output.length, 'every item done');
    return events;
}

async function formatChecks(OpenAI, errors, label, preset, tmp) {
    const modelDir = path.join(tmp, preset);
    execFileSync(KIMI, ['make-model', '--preset', preset, '--seed', '1', '--out', modelDir, '--quiet'], { stdio: 'pipe' });
    const k3 = preset.startsWith('k3');
    const srv = await startServer(KIMI, modelDir, ['--threads', '2']);
    try {
        const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'x', maxRetries: 0, timeout: 120000 });
        const noThink = k3 ? { reasoning: { effort: 'none' } } : {};
        const base = { model: MODEL_NAME, max_output_tokens: 12, temperature: 0, ignore_eos: true, instructions: 'You are Kimi.', input: 'Say hello.' };

        await check(`${label}: a plain reply: a message item, incomplete at max_output_tokens, usage`, async () => {
            const r = await client.responses.create({ ...base, ...noThink });
            eq(r.object, 'response', 'object');
            assert(/^resp_/.test(r.id), `id ${r.id}`);
            eq(r.status, 'incomplete', 'status');
            eq(r.incomplete_details, { reason: 'max_output_tokens' }, 'incomplete_details');
            eq(r.output.map((o) => o.type), ['message'], 'output items');
            eq(r.output[0].content[0].type, 'output_text', 'part type');
            eq(r.output_text, r.output[0].content[0].text, 'the SDK\'s output_text');
            eq(r.usage.output_tokens, 12, 'output_tokens');
            eq(r.instructions, 'You are Kimi.', 'instructions echoed');
            const ids = templateIds(tmp, modelDir, { messages: [{ role: 'system', content: 'You are Kimi.' }, { role: 'user', content: 'Say hello.' }],
                                                    ...(k3 ? { chat_template_kwargs: { thinking: false, thinking_effort: 'low' } } : {}) });
            eq(r.usage.input_tokens, ids.length, 'input_tokens = the template\'s render');
            assert(Number.isInteger(r.usage.input_tokens_details.cached_tokens), 'cached_tokens');
        });

        await check(`${label}: the stream's events reassemble to the plain reply`, async () => {
            const plain = await client.responses.create({ ...base, ...noThink });
            const events = await rawStream(client, { ...base, ...noThink });
            const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
            eq(text, plain.output_text, 'output_text deltas');
            eq(noIds(events.at(-1).response.output), noIds(plain.output), 'the completed response');
            const fin = await client.responses.stream({ ...base, ...noThink }).finalResponse();
            eq(noIds(fin.output), noIds(plain.output), 'the SDK\'s finalResponse');
        });

        let call = null, first = null;
        const forced = { model: MODEL_NAME, max_output_tokens: 1500, temperature: 0, tools: [WEATHER],
                         tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false, input: 'Weather in Paris?', ...noThink };
        await check(`${label}: a forced tool call is a function_call item (plain and streamed)`, async () => {
            first = await client.responses.create(forced);
            const calls = first.output.filter((o) => o.type === 'function_call');
            eq(calls.length, 1, `one function_call in ${fmt(first.output)}`);
            eq(calls[0].name, 'get_weather', 'name');
            const a = JSON.parse(calls[0].arguments);
            assert(['Paris', 'Rome'].includes(a.city), `arguments ${calls[0].arguments}`);
            call = calls[0];
            const events = await rawStream(client, forced);
            eq(noIds(events.at(-1).response.output), noIds(first.output), 'streamed output');
            assert(events.some((e) => e.type === 'response.function_call_arguments.delta'), 'arguments delta event');
        });

        await check(`${label}: the tool result by previous_response_id and by explicit items give the same reply`, async () => {
            assert(call && first, 'no call from the previous check');
            const result = { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 °C' };
            const more = { model: MODEL_NAME, max_output_tokens: 8, temperature: 0, ignore_eos: true, tools: [WEATHER], ...noThink };
            const byId = await client.responses.create({ ...more, previous_response_id: first.id, input: [result] });
            eq(byId.previous_response_id, first.id, 'previous_response_id echoed');
            const explicit = await client.responses.create({ ...more, input: [{ role: 'user', content: 'Weather in Paris?' },
                { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments }, result] });
            eq(noIds(byId.output), noIds(explicit.output), 'the same reply');
            eq(byId.usage.input_tokens, explicit.usage.input_tokens, 'the same prompt');
            const ids = templateIds(tmp, modelDir, {
                messages: [{ role: 'user', content: 'Weather in Paris?' },
                           { role: 'assistant', content: '', tool_calls: [{ id: call.call_id, type: 'function', function: { name: call.name, arguments: call.arguments } }] },
                           { role: 'tool', tool_call_id: call.call_id, content: 'sunny, 21 °C' }],
                tools: [{ type: 'function', function: { name: WEATHER.name, description: WEATHER.description, parameters: WEATHER.parameters } }],
                ...(k3 ? { chat_template_kwargs: { thinking: false, thinking_effort: 'low' } } : {}),
            });
            eq(explicit.usage.input_tokens, ids.length, 'input_tokens = the template\'s render of the round trip');
        });

        await check(`${label}: store, retrieve, delete; store false and unknown ids are 404`, async () => {
            const r = await client.responses.create({ ...base, ...noThink, max_output_tokens: 2 });
            const got = await client.responses.retrieve(r.id);
            eq(noIds(got.output), noIds(r.output), 'retrieved');
            const del = await client.responses.delete(r.id).catch((e) => e);
            assert(!(del instanceof Error), `delete: ${del && del.message}`);
            for (const id of [r.id, 'resp_unknown']) {
                let err = null;
                try { await client.responses.retrieve(id); } catch (e) { err = e; }
                assert(err instanceof errors.NotFoundError, `retrieve ${id}: ${err && err.status}`);
            }
            const unstored = await client.responses.create({ ...base, ...noThink, max_output_tokens: 2, store: false });
            let err = null;
            try { await client.responses.create({ ...base, ...noThink, previous_response_id: unstored.id, input: 'more' }); } catch (e) { err = e; }
            assert(err instanceof errors.NotFoundError && err.status === 404, `store false: ${err && err.status}`);
            assert(/not found/.test(err.message), `message ${err.message}`);
        });

        await check(`${label}: text.format json_schema shapes the reply`, async () => {
            const r = await client.responses.create({ model: MODEL_NAME, max_output_tokens: 400, temperature: 0, input: 'Pick a city.', ...noThink,
                text: { format: { type: 'json_schema', name: 'city', strict: true,
                                  schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false } } } });
            const j = JSON.parse(r.output_text);
            assert(['Paris', 'Rome'].includes(j.city) && Object.keys(j).length === 1, `reply ${r.output_text}`);
        });

        if (k3) {
            await check(`${label}: reasoning.effort low gives a reasoning item and renders effort low; none gives none`, async () => {
                const on = await client.responses.create({ ...base, reasoning: { effort: 'low' } });
                eq(on.output[0].type, 'reasoning', `first item of ${fmt(on.output)}`);
                eq(on.output[0].content[0].type, 'reasoning_text', 'reasoning_text');
                const ids = templateIds(tmp, modelDir, { messages: [{ role: 'system', content: 'You are Kimi.' }, { role: 'user', content: 'Say hello.' }],
                                                        chat_template_kwargs: { thinking: true, thinking_effort: 'low' } });
                eq(on.usage.input_tokens, ids.length, 'input_tokens with effort low');
                const events = await rawStream(client, { ...base, reasoning: { effort: 'low' } });
                eq(noIds(events.at(-1).response.output), noIds(on.output), 'streamed');
                assert(events.some((e) => e.type === 'response.reasoning_text.delta'), 'reasoning_text delta events');
                const off = await client.responses.create({ ...base, reasoning: { effort: 'none' } });
                assert(off.output.every((o) => o.type !== 'reasoning'), `effort none: ${fmt(off.output)}`);
            });
            await check(`${label}: an input_image part reaches the prompt`, async () => {
                const url = 'data:image/png;base64,' + png(64, 48, (x, y) => [(x * 4) & 255, (y * 5) & 255, 90]).toString('base64');
                const withImage = await client.responses.create({ ...base, ...noThink, input: [{ role: 'user', content: [
                    { type: 'input_image', image_url: url }, { type: 'input_text', text: 'What is this?' }] }] });
                const without = await client.responses.create({ ...base, ...noThink, input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is this?' }] }] });
                eq(withImage.usage.output_tokens, 12, 'output_tokens');
                assert(withImage.usage.input_tokens > without.usage.input_tokens + 4,
                       `the image adds its tokens: ${withImage.usage.input_tokens} vs ${without.usage.input_tokens}`);
            });
        }

        await check(`${label}: errors`, async () => {
            const expect = async (params, Cls, status, needle) => {
                let err = null;
                try { await client.responses.create(params); } catch (e) { err = e; }
                assert(err instanceof Cls && err.status === status, `${needle}: got ${err && err.status} ${err && err.message}`);
                assert(err.message.includes(needle), `message ${fmt(err.message)}`);
            };
            const { input, ...noInput } = base;
            void input;
            await expect(noInput, errors.BadRequestError, 400, 'input');
            await expect({ ...base, input: [{ type: 'item_reference', id: 'x' }] }, errors.BadRequestError, 400, 'item_reference');
            await expect({ ...base, tools: [{ type: 'function', name: 'f', parameters: [] }] }, errors.BadRequestError, 400, 'parameters');
            await expect({ ...base, reasoning: { effort: 'extreme' } }, errors.BadRequestError, 400, 'reasoning.effort');
            await expect({ ...base, model: 'gpt-x' }, errors.NotFoundError, 404, 'gpt-x');
            // a reasoning item with no assistant output after it (a reply cut short) is dropped, not refused
            const cut = await client.responses.create({ ...base, ...noThink, input: [
                { type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'Thinking…' }] }, { role: 'user', content: 'Go on.' }] });
            eq(cut.status, 'incomplete', 'a dangling reasoning item is accepted');
            const cutIds = templateIds(tmp, modelDir, { messages: [{ role: 'system', content: 'You are Kimi.' }, { role: 'user', content: 'Go on.' }],
                                                       ...(k3 ? { chat_template_kwargs: { thinking: false, thinking_effort: 'low' } } : {}) });
            eq(cut.usage.input_tokens, cutIds.length, 'the dangling reasoning item is dropped: the prompt is the render without it');
        });
    } finally {
        await checkShutdown(`${label} server`, srv);
    }
}

async function main() {
    const mod = await importOpenAI(args['node-modules']);
    const OpenAI = mod.default;
    const { tmp } = makeTinyModel(KIMI, 'kimi-responses-', 'tiny');
    const t0 = Date.now();
    try {
        await formatChecks(OpenAI, mod, 'Kimi Linear', 'tiny', tmp);
        await formatChecks(OpenAI, mod, 'Kimi-K3', 'k3-tiny', tmp);
    } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
    }
    return report(t0);
}

runMain(main);
