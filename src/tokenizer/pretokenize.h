// Pre-tokenizer: a hand-written matcher for tiktoken's split regex (pat_str), for Kimi's
// pattern and for OpenAI's o200k_base pattern (Kimi's minus the Han parts, used to test the
// BPE against o200k). It returns exactly the matches that Rust fancy-regex's find_iter gives
// for these patterns (leftmost-first alternation with backtracking), see docs/tokenizer.md.
//
// Kimi (tokenization_kimi.py), the alternatives in order:
//   1 [\p{Han}]+
//   2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   3 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   4 \p{N}{1,3}
//   5  ?[^\s\p{L}\p{N}]+[\r\n]*          (o200k: [\r\n/]*)
//   6 \s*[\r\n]+
//   7 \s+(?!\S)
//   8 \s+
// Every position starts some match, so the matches tile the text. Bytes that are not valid
// UTF-8 are treated as single characters of no class (like punctuation).
#pragma once
#include <cstddef>
#include <string_view>

namespace kimi::tok {

enum class Pattern { kimi, o200k };

const char* pattern_regex(Pattern p);   // the pat_str this matcher implements, verbatim

class Splitter {
public:
    Splitter(std::string_view text, Pattern pattern);
    // Next match; false at the end of the text.
    bool next(std::string_view& piece);

private:
    size_t match_at(size_t p) const;
    const unsigned char* s_;
    size_t n_;
    size_t pos_ = 0;
    const unsigned char* derived_;   // class bits -> derived bits for this pattern
    bool slash_tail_;                // o200k: [\r\n/]* after punctuation
};

}   // namespace kimi::tok
