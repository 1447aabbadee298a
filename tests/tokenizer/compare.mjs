// Compares the oracle's token ids with kimi-cpp's, line by line; prints the first mismatches.
//   node compare.mjs CORPUS.jsonl EXPECTED.jsonl ACTUAL.jsonl
import fs from 'node:fs';

const [corpusPath, expPath, actPath] = process.argv.slice(2);
const read = (p) => fs.readFileSync(p, 'utf8').split('\n').filter((l) => l.length > 0);
const corpus = read(corpusPath), exp = read(expPath), act = read(actPath);
let bad = 0, tokens = 0;
if (exp.length !== corpus.length || act.length !== corpus.length) {
  console.log(`line counts differ: corpus ${corpus.length}, expected ${exp.length}, actual ${act.length}`);
  process.exit(1);
}
for (let i = 0; i < exp.length; ++i) {
  const e = JSON.parse(exp[i]);
  tokens += e.length;
  if (exp[i] === act[i]) continue;
  const a = JSON.parse(act[i]);
  if (++bad <= 5) {
    let k = 0;
    while (k < e.length && e[k] === a[k]) ++k;
    console.log(`line ${i + 1}: first difference at token ${k}: expected ${JSON.stringify(e.slice(k, k + 8))}, ` +
      `got ${JSON.stringify(a.slice(k, k + 8))}; text starts ${JSON.stringify(JSON.parse(corpus[i]).slice(0, 60))}`);
  }
}
console.log(`${exp.length} lines, ${tokens} tokens compared, ${bad} lines differ`);
process.exit(bad === 0 && exp.length > 0 ? 0 : 1);
