// Shared helpers for the node side of the tokenizer tests: the Kimi special-token layout
// (tokenization_kimi.py: ids n_base .. n_base+257, names from added_tokens_decoder or
// <|reserved_token_{id}|>), the patterns, and the Python wrapper's splitting
// (400,000-code-point windows, then runs of at most 25,000 str.isspace()/non-space chars).
import fs from 'node:fs';
import path from 'node:path';

export const KIMI_PAT = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
].join('|');

// Kimi's table, as offsets from n_base (tokenizer_config.json of the K2 family / Kimi Linear).
export const KIMI_SPECIALS = {
  0: '[BOS]', 1: '[EOS]', 2: '<|im_end|>', 3: '<|im_user|>', 4: '<|im_assistant|>',
  6: '<|start_header_id|>', 7: '<|end_header_id|>', 9: '[EOT]', 10: '<|im_system|>',
  11: '<|tool_calls_section_begin|>', 12: '<|tool_calls_section_end|>', 13: '<|tool_call_begin|>',
  14: '<|tool_call_argument_begin|>', 15: '<|tool_call_end|>', 17: '<|im_middle|>',
  18: '<|media_start|>', 19: '<|media_content|>', 20: '<|media_end|>', 21: '<|media_pad|>',
  254: '[UNK]', 255: '[PAD]',
};


export function readKimiDir(dir) {
  const bpe = fs.readFileSync(path.join(dir, 'tiktoken.model'), 'utf8');
  const nBase = bpe.split('\n').filter((l) => l.length > 0).length;
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
  const dec = cfg.added_tokens_decoder || {};
  const specials = {};
  for (let id = nBase; id < nBase + 258; ++id) specials[dec[id] ? dec[id].content : `<|reserved_token_${id}|>`] = id;
  return { bpe, nBase, specials };
}

const isspace = (c) => (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c === 0x85 || c === 0xa0 || c === 0x1680 ||
  (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000;

// tokenization_kimi.py encode(): windows, then _split_whitespaces_or_nonwhitespaces.
export function pythonPieces(text) {
  const cps = Array.from(text);
  const out = [];
  for (let w = 0; w < cps.length; w += 400000) {
    const s = cps.slice(w, w + 400000);
    let len = 0, cur = s.length ? isspace(s[0].codePointAt(0)) : false, start = 0;
    for (let i = 0; i < s.length; ++i) {
      const sp = isspace(s[i].codePointAt(0));
      if (sp !== cur) { len = 1; cur = sp; } else if (++len > 25000) { out.push(s.slice(start, i).join('')); start = i; len = 1; }
    }
    out.push(s.slice(start).join(''));
  }
  return out;
}
