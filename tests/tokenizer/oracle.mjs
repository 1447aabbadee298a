// The exactness oracle: npm `tiktoken` (WASM build of tiktoken's Rust CoreBPE, fancy-regex)
// constructed from a Kimi-layout directory's tiktoken.model, its specials and a pat_str,
// with tokenization_kimi.py's splitting applied first (npm tiktoken is the bare core).
//   node oracle.mjs NODE_MODULES TOKENIZER_DIR CORPUS.jsonl OUT.jsonl kimi|o200k all|none
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { KIMI_PAT, readKimiDir, pythonPieces } from './kimi_layout.mjs';

const [nodeModules, dir, corpus, outPath, pattern, special] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { Tiktoken } = require(path.resolve(nodeModules, 'tiktoken'));
const o200kPat = JSON.parse(fs.readFileSync(path.join(nodeModules, 'tiktoken', 'encoders', 'o200k_base.json'), 'utf8')).pat_str;
const pat = pattern === 'kimi' ? KIMI_PAT : o200kPat;
const { bpe, specials } = readKimiDir(dir);
const enc = new Tiktoken(bpe, specials, pat);
const out = fs.openSync(outPath, 'w');
let n = 0;
for (const line of fs.readFileSync(corpus, 'utf8').split('\n')) {
  if (!line) continue;
  const text = JSON.parse(line);
  const ids = [];
  for (const piece of pythonPieces(text)) {
    const part = special === 'all' ? enc.encode(piece, 'all') : enc.encode(piece, [], []);
    for (const id of part) ids.push(id);
  }
  fs.writeSync(out, JSON.stringify(ids) + '\n');
  ++n;
}
fs.closeSync(out);
enc.free();
console.log(`oracle: ${n} lines (${pattern}, special ${special})`);
