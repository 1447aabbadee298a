// Deterministic test corpus for the tokenizer exactness tests (one JSON string per line):
// many scripts, case and contraction patterns, digit runs, emoji sequences, combining marks,
// zero-width characters, every kind of whitespace, special-token text in prose, code, random
// code points, runs longer than 25,000 characters and inputs longer than 400,000 characters.
//   node gen_corpus.mjs OUT.jsonl [SEED]
import fs from 'node:fs';

const [outPath, seedArg] = process.argv.slice(2);
let state = BigInt(seedArg ?? 1) & 0xffffffffffffffffn;
function next() {   // splitmix64
  state = (state + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = state;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  return z ^ (z >> 31n);
}
const below = (n) => Number(next() % BigInt(n));
const pick = (a) => a[below(a.length)];
const cp = (...c) => String.fromCodePoint(...c);
const range = (lo, hi) => cp(lo + below(hi - lo + 1));

// Fragments by kind.
const english = `The quick brown fox jumps over the lazy dog. It's a truth universally acknowledged that
a single man in possession of a good fortune must be in want of a wife. We'll see; they're
sure you've done it, and I'd say he'll agree. Don't panic! "Quoted," she said -- (parenthetical)
remarks [brackets] {braces} and semi-colons; colons: ellipses... dashes — en – em. 42 is 6*7.`.split(/(?<=[.!;])\s+/);
const words = english.join(' ').split(/\s+/);
const scripts = {
  han: () => range(0x4e00, 0x9fff),
  hanExtA: () => range(0x3400, 0x4dbf),
  hanAstral: () => pick([range(0x20000, 0x2a6df), range(0x2a700, 0x2b73f), range(0x30000, 0x3134f), range(0x31350, 0x323af), range(0x2ebf0, 0x2ee5d)]),
  hanMisc: () => pick(['々', '〇', '〆', '〡', '〩', '⺀', '⼀', '㐀', '豈', '丶', 'ー', '〻', '\u{16ff0}', '\u{16fe4}']),
  hiragana: () => range(0x3041, 0x3096),
  katakana: () => range(0x30a1, 0x30fa),
  hangul: () => range(0xac00, 0xd7a3),
  jamo: () => range(0x1100, 0x11ff),
  arabic: () => range(0x0621, 0x064a) + (below(3) === 0 ? range(0x064b, 0x0652) : ''),
  arabicDigits: () => range(0x0660, 0x0669),
  devanagari: () => range(0x0905, 0x0939) + (below(2) ? range(0x093e, 0x094d) : ''),
  thai: () => range(0x0e01, 0x0e2e) + (below(3) === 0 ? pick(['\u0e31', '\u0e34', '\u0e48', '\u0e49']) : ''),
  greek: () => pick([range(0x0391, 0x03a9), range(0x03b1, 0x03c9), 'ά', 'ς', 'ΐ', 'ϴ', 'ᾈ', 'ᾼ']),
  cyrillic: () => pick([range(0x0410, 0x042f), range(0x0430, 0x044f), 'ё', 'Ё', 'ї', 'ᲀ', '\u1c89', '\u1c8a']),
  latin: () => pick([range(0x61, 0x7a), range(0x41, 0x5a), range(0xc0, 0xff), range(0x100, 0x17f), 'ǅ', 'ǈ', 'ß', 'ẞ', 'ﬁ', 'ſ', 'ı', 'İ', 'ʰ', 'ª', 'º']),
  combining: () => pick(['e\u0301', 'a\u0308', 'n\u0303', 'o\u0302\u0323', '\u0301', '\u20dd', 'i\u0307', 'Z\u0336\u0337', '\u0488']),
  digits: () => range(0x30, 0x39),
  otherNumbers: () => pick(['²', '³', '¹', '½', '¾', 'Ⅻ', 'ⅷ', '①', '⑳', '０', '９', '𝟘', '٣', '۴', '१', '๓', '𐄇', '〥']),
  emoji: () => pick(['🙂', '👍🏽', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇯🇵', '🇺🇸', '1️⃣', '#️⃣', '❤️', '✌🏿', '🧑🏻‍🚀', '🫠', '🪿', '☺︎', '\u{1f3fb}', '\u{e0067}']),
  zeroWidth: () => pick(['\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u00ad', '\u034f', '\u180e', '\u061c', '\u2066', '\u202e']),
  space: () => pick([' ', ' ', ' ', '\t', '\n', '\r', '\r\n', '\v', '\f', '\u0085', '\u00a0', '\u1680', '\u2000', '\u2003', '\u200a',
    '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\u001c', '\u001f', '  ', '\n\n', ' \n ', '\t\t', '\r\r\n']),
  punct: () => pick(['.', ',', '!', '?', ';', ':', '"', "'", '(', ')', '[', ']', '{', '}', '<', '>', '/', '\\', '|', '-', '_', '+', '=',
    '*', '&', '^', '%', '$', '#', '@', '~', '`', '…', '—', '«', '»', '“', '”', '‘', '’', '。', '、', '「', '」', '！', '？', '¿', '¡', '§', '€', '©']),
};
const specialTexts = ['[BOS]', '[EOS]', '<|im_end|>', '<|im_user|>', '<|im_assistant|>', '<|start_header_id|>', '<|end_header_id|>',
  '[EOT]', '<|im_system|>', '<|tool_calls_section_begin|>', '<|tool_calls_section_end|>', '<|tool_call_begin|>',
  '<|tool_call_argument_begin|>', '<|tool_call_end|>', '<|im_middle|>', '<|media_start|>', '<|media_pad|>', '[UNK]', '[PAD]',
  '<|reserved_token_199998|>', '<|reserved_token_200003|>', '<|reserved_token_200254|>', '<|reserved_token_200255|>',
  '<|reserved_token_163589|>', '<|im_end|', '<|im_end>', '[BOS', 'BOS]', '<||>', '<|endoftext|>', '[[EOS]]', '<|<|im_end|>|>'];
const casing = ['helloWorld', 'iPhone', 'getUserName', 'HTTPServer', 'parseJSONResponse', 'XMLHttpRequest', 'ALLCAPS', 'CamelCase',
  "I'M", "WE'LL", "They're", "DON'T", "it's", "It'S", "you'VE", "she'd", "he'Ll", "o'clock", "rock'n'roll", "'s", "''s", "x'ſ",
  "y'ſt", "ǅemal", "ǈubljana", "ΣΊΣΥΦΟΣ", "Straße", "STRASSE", "McDonald's", "O'Neil", "e'\u0301s", "don’t", "I'm'm", "'re're"];
const code = ['int main(void) { return 0; }', 'for (size_t i = 0; i < n; ++i) a[i] += b[i];', 'def f(x):\n    return x**2\n',
  '{"key": [1, 2.5, -3e10, null, true], "nested": {"a": "b"}}', '<div class="x">&nbsp;</div>', 'https://example.com/a/b?c=d&e=f#g',
  '/usr/local/bin/', 'C:\\Windows\\System32', 'x = y // 2  # floor', '// comment\n/* block */', 'a/b/c/', '!/\n', '...\n\n/',
  'if (a&&b||!c) {}', '$ echo "$HOME"/*.txt', 'SELECT * FROM t WHERE id=42;', '0x1F 0b1010 1_000_000 3.14159 1e-9'];

function fragment(kind) {
  switch (kind) {
    case 'prose': return pick(english);
    case 'words': { let s = ''; for (let i = 0, n = 1 + below(12); i < n; ++i) s += (i ? ' ' : '') + pick(words); return s; }
    case 'casing': return pick(casing);
    case 'code': return pick(code);
    case 'special': return pick(specialTexts);
    case 'digits': { let s = ''; for (let i = 0, n = 1 + below(14); i < n; ++i) s += scripts.digits(); return s; }
    default: {
      const f = scripts[kind];
      let s = '';
      for (let i = 0, n = 1 + below(10); i < n; ++i) s += f();
      return s;
    }
  }
}
const kinds = ['prose', 'words', 'casing', 'code', 'special', 'digits', ...Object.keys(scripts)];

function mixedLine() {
  let s = '';
  for (let i = 0, n = 1 + below(16); i < n; ++i) {
    s += fragment(pick(kinds));
    if (below(3) === 0) s += scripts.space();
  }
  return s;
}

// Valid UTF-8 noise: random code points from all planes (no surrogates), incl. unassigned.
function noiseLine() {
  let s = '';
  for (let i = 0, n = 1 + below(120); i < n; ++i) {
    let c;
    switch (below(6)) {
      case 0: c = below(0x80); break;
      case 1: c = below(0x800); break;
      case 2: c = below(0x10000); break;
      case 3: c = 0x10000 + below(0x20000); break;
      case 4: c = below(0x110000); break;
      default: c = pick([0x20, 0x0a, 0x0d, 0x27, 0x73, 0x2f, 0x85, 0xa0, 0x3000, 0x200b, 0xfeff, 0x180e, 0x1c]);
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    s += cp(c);
  }
  return s;
}

const lines = [];
// The reference splits of the docs, and some edge cases.
lines.push('helloWorld', 'iPhone', 'getUserName', 'HTTPServer', '中文English混合', "I'M here, we'll go", '123456789', '  leading\n\n  x',
  'tab\tsep', '々〇𠀀abc', '', ' ', '\n', '\r\n', '\r', 'a', "'", "'s", ' !', '!\n', '!\r\n/', 'x /\n/', '  \u0085', '\ufeff', ' \ufeff ',
  '\u001c\u001d a \u001e', 'a\u180eb', '<|im_end|>', '<|im_end|><|im_end|>', '[BOS]text[EOS]', '\u0301', ' \u0301x', '\u0301\u0301A');
for (let i = 0; i < 1500; ++i) lines.push(mixedLine());
for (let i = 0; i < 400; ++i) lines.push(fragment(pick(kinds)));
for (let i = 0; i < 1500; ++i) lines.push(noiseLine());
for (let i = 0; i < 100; ++i) {   // prose with special-token text inside
  let s = '';
  for (let k = 0; k < 6; ++k) s += pick(english) + (below(2) ? ' ' : '') + pick(specialTexts) + (below(2) ? ' ' : '');
  lines.push(s);
}
for (let i = 0; i < 60; ++i) {   // whitespace-only and whitespace-heavy lines
  let s = '';
  for (let k = 0, n = 1 + below(30); k < n; ++k) s += below(4) ? scripts.space() : fragment(pick(['punct', 'latin', 'han', 'digits']));
  lines.push(s);
}
// Long runs around the 25,000-character cut and the 400,000-character window. (Pieces that
// stay one regex match for 25,000 characters are slow in the oracle's BPE, so most long runs
// mix classes without whitespace: the cut still applies, the regex pieces stay short.)
const rep = (s, n) => s.repeat(n);
lines.push(rep('a', 25000), rep('a', 25001), rep(' ', 25003) + 'x', rep('x', 24995) + '<|im_end|>' + rep('y', 10),
  rep('ab1!', 8000), rep('中é1!😀a', 6000), rep('😀a', 13000), rep('한국어!', 7000), rep('中中中!', 6300),
  rep('\r\n', 12600), 'start ' + rep('\u0085', 25001) + ' end', rep('\u3000', 60) + rep('\u0085', 25000) + 'z',
  rep('1', 50001), rep("don't", 6000), rep('Ab', 13000) + ' ' + rep(' \n', 12600), rep('x', 24999) + '[BOS]' + rep(' ', 3));
{
  let big = '';
  while (big.length < 450000) big += mixedLine() + ' ';
  lines.push(big);
  const parts = [];
  let n = 0;
  while (n < 399996) {
    const w = pick(words) + ' ';
    parts.push(w);
    n += Array.from(w).length;
  }
  const cps = Array.from(parts.join('')).slice(0, 399996);
  lines.push(cps.slice(0, 399995).join('') + 'helloWorld getUserName tail');     // window boundary inside a word
  lines.push(cps.slice(0, 399996).join('') + '<|im_end|> after'); // a special token across the window boundary
  lines.push(rep('ab ', 133333) + '<|im_end|>' + rep('c', 20));
}
fs.writeFileSync(outPath, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
let chars = 0;
for (const l of lines) chars += l.length;
console.log(`corpus: ${lines.length} lines, ${chars} UTF-16 units, ${fs.statSync(outPath).size} bytes`);
