// Writes a Kimi-layout tokenizer directory from the o200k_base ranks that npm `tiktoken`
// ships (encoders/o200k_base.json, "! <offset> <b64> <b64> ..." compressed lines), with the
// Kimi specials appended at Kimi's offsets after the base ranks.
//   node make_oracle_dir.mjs NODE_MODULES OUT_DIR
import fs from 'node:fs';
import path from 'node:path';
import { KIMI_SPECIALS } from './kimi_layout.mjs';

const [nodeModules, outDir] = process.argv.slice(2);
const enc = JSON.parse(fs.readFileSync(path.join(nodeModules, 'tiktoken', 'encoders', 'o200k_base.json'), 'utf8'));
const lines = [];
for (const line of enc.bpe_ranks.split('\n')) {
  if (!line) continue;
  const f = line.split(' ');
  if (f[0] !== '!') throw new Error('unexpected rank line: ' + line.slice(0, 40));
  const offset = Number(f[1]);
  for (let i = 2; i < f.length; ++i) lines.push(`${f[i]} ${offset + i - 2}`);
}
const nBase = lines.length;
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'tiktoken.model'), lines.join('\n') + '\n');
const dec = {};
for (let k = 0; k < 256; ++k) {
  const id = nBase + k;
  const content = KIMI_SPECIALS[k] ?? `<|reserved_token_${id}|>`;
  dec[id] = { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: !(k >= 11 && k <= 15) };
}
fs.writeFileSync(path.join(outDir, 'tokenizer_config.json'), JSON.stringify({
  added_tokens_decoder: dec, bos_token: '[BOS]', eos_token: '[EOS]', pad_token: '[PAD]', unk_token: '[UNK]',
  tokenizer_class: 'TikTokenTokenizer',
}, null, 1) + '\n');
console.log(`wrote ${outDir}: ${nBase} o200k ranks + Kimi specials at ${nBase}..${nBase + 257}`);
