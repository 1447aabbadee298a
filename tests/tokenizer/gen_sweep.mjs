// Code-point sweep for the exactness tests: every code point of planes 0-3 and 14 (and every
// 61st one elsewhere, surrogates excluded), each in a few contexts that expose its class
// under the pat_str (upper/lower-set letter, Han, number, mark, space, other):
//   "a" c "b" | c "Ba" | " " c "1" | c c " " | "x" c "'s\n"
// 256 code points per line.   node gen_sweep.mjs OUT.jsonl
import fs from 'node:fs';

const [outPath] = process.argv.slice(2);
const cps = [];
for (let c = 0; c < 0x110000; ++c) {
  if (c >= 0xd800 && c <= 0xdfff) continue;
  const plane = c >> 16;
  if (plane <= 3 || plane === 14 || c % 61 === 0) cps.push(c);
}
const lines = [];
for (let i = 0; i < cps.length; i += 256) {
  let s = '';
  for (const c of cps.slice(i, i + 256)) {
    const ch = String.fromCodePoint(c);
    s += 'a' + ch + 'b' + ch + 'Ba ' + ch + '1' + ch + ch + ' x' + ch + "'s\n";
  }
  lines.push(JSON.stringify(s));
}
fs.writeFileSync(outPath, lines.join('\n') + '\n');
console.log(`sweep: ${cps.length} code points in ${lines.length} lines`);
