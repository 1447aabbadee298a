// The default model (models/kimi-k3-mini, trained by tools/train_default/) behind `kimi-cpp
// serve`, asked by the stock `openai` npm client as a user asks it: its held-out evaluation set
// (eval.jsonl, another seed than training's, no training question repeated), greedy. A
// multiplication is two turns: the model's `calculator` call (valid JSON arguments), this
// harness's result as a tool message, the model's answer. Scored exactly as `kimi-cpp eval
// tasks` scores (src/bench/task_eval.h), and checked against the goals of the model card:
//   2-digit addition and subtraction >= 95 %, 3-digit addition >= 80 %, calculator >= 90 %,
//   colour and shape names >= 90 %, json_schema answers >= 95 %.
//
//   node tests/server/default_model_test.mjs --kimi /abs/kimi-cpp --node-modules /abs/node_modules
//        [--model models/kimi-k3-mini] [--limit N] [--json OUT]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliArgs, fmt, assert, check, report, runMain, startServer, stopServer, importOpenAI } from './common.mjs';

const args = cliArgs('usage: default_model_test.mjs --kimi PATH --node-modules DIR [--model DIR] [--limit N] [--json OUT]',
                     ['kimi', 'node-modules']);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MODEL_DIR = args.model || path.join(REPO, 'models', 'kimi-k3-mini');
const NAME = 'kimi-k3-mini';
const GOALS = [   // [label, tasks, minimum accuracy]
    ['2-digit addition and subtraction', ['add2', 'sub2'], 0.95],
    ['3-digit addition', ['add3'], 0.80],
    ['multiplication through the calculator', ['mul'], 0.90],
    ['colour and shape names', ['colour', 'shape'], 0.90],
    ['json_schema answers', ['json'], 0.95],
];

// The evaluation set's items as `eval tasks` reads them: the call row of a multiplication (its
// answer the expected arguments), the second-turn rows left out.
function readItems(file) {
    const items = [];
    fs.readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
        if (!line.trim()) return;
        const j = JSON.parse(line);
        if (j.task === 'mul_answer') return;
        items.push({ id: i + 1, task: j.task === 'mul_call' ? 'mul' : j.task, request: j.request, answer: j.answer });
    });
    return items;
}

// An integer expression of + - * and parentheses (the calculator), or null.
function evalExpression(expr) {
    if (typeof expr !== 'string' || !/^[\d\s+\-*()]+$/.test(expr)) return null;
    try {
        const v = Function(`"use strict"; return (${expr});`)();
        return Number.isSafeInteger(v) ? v : null;
    } catch (_) {
        return null;
    }
}
const normaliseName = (s) => s.trim().toLowerCase().replace(/[\s\p{P}]+$/u, '').replace(/^(a|an|the) /, '').trim();

function scoreReply(item, message) {
    const content = typeof message.content === 'string' ? message.content : '';
    if (item.task === 'colour' || item.task === 'shape') return normaliseName(content) === item.answer;
    if (item.task === 'json') {
        try {
            const j = JSON.parse(content);
            return j !== null && typeof j === 'object' && Number.isInteger(j.answer) && j.answer === item.answer;
        } catch (_) {
            return false;
        }
    }
    return content.trim() === String(item.answer);
}

async function runItem(client, item, maxTokens) {
    const body = { ...item.request, model: NAME, temperature: 0, max_tokens: maxTokens, seed: 0 };
    const first = (await client.chat.completions.create(body)).choices[0].message;
    if (item.task !== 'mul') return { correct: scoreReply(item, first), reply: first };
    const want = evalExpression(item.answer.expression);
    const calls = first.tool_calls || [];
    let value = null, args = null;
    if (calls.length === 1 && calls[0].function?.name === 'calculator') {
        try {
            args = JSON.parse(calls[0].function.arguments);
        } catch (_) { /* not JSON: the call fails */ }
        if (args && typeof args === 'object') value = evalExpression(args.expression);
    }
    if (value === null) return { correct: false, reply: first };
    const messages = [...body.messages, first, { role: 'tool', tool_call_id: calls[0].id, content: String(value) }];
    const second = (await client.chat.completions.create({ ...body, messages })).choices[0].message;
    return { correct: value === want && scoreReply({ task: 'mul', answer: want }, second), reply: first, second };
}

async function main() {
    const OpenAI = (await importOpenAI(args['node-modules'])).default;
    let items = readItems(path.join(MODEL_DIR, 'eval.jsonl'));
    if (args.limit) items = items.slice(0, Number(args.limit));
    const t0 = Date.now();
    const srv = await startServer(args.kimi, MODEL_DIR, ['--threads', '2'], NAME);
    const results = [];
    try {
        const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'x', maxRetries: 0, timeout: 120000 });
        await check('GET /v1/models names the default model', async () => {
            const models = await client.models.list();
            assert(models.data.length === 1 && models.data[0].id === NAME, fmt(models.data));
        });
        // four at a time, as users would send them
        let next = 0;
        const worker = async () => {
            for (let i; (i = next++) < items.length;) results[i] = { item: items[i], ...(await runItem(client, items[i], 256)) };
        };
        await Promise.all([worker(), worker(), worker(), worker()]);
    } finally {
        await stopServer(srv);
    }
    const acc = (tasks) => {
        const r = results.filter((x) => tasks.includes(x.item.task));
        return { n: r.length, correct: r.filter((x) => x.correct).length };
    };
    const table = {};
    for (const task of [...new Set(items.map((x) => x.task))].sort()) table[task] = acc([task]);
    console.log('| task | n | correct | accuracy |\n| --- | --- | --- | --- |');
    for (const [task, t] of Object.entries(table))
        console.log(`| ${task} | ${t.n} | ${t.correct} | ${(100 * t.correct / t.n).toFixed(1)} % |`);
    const goals = [];
    for (const [label, tasks, min] of GOALS) {
        const t = acc(tasks);
        goals.push({ goal: label, tasks, n: t.n, accuracy: t.n ? t.correct / t.n : null, minimum: min });
        await check(`goal: ${label} >= ${100 * min} %`, async () => {
            assert(t.n > 0, 'no items of this goal');
            assert(t.correct / t.n >= min, `${t.correct} of ${t.n} (${(100 * t.correct / t.n).toFixed(1)} %)`);
        });
    }
    if (args.json) fs.writeFileSync(args.json, JSON.stringify({ model: MODEL_DIR, n_items: items.length, tasks: table, goals,
                                                                 samples: results }, null, 1));
    return report(t0);
}

runMain(main);
