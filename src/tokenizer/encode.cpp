// Encoding, in the order Kimi's TikTokenTokenizer.encode applies the steps:
//   1. 400,000-code-point windows (TIKTOKEN_MAX_ENCODE_CHARS),
//   2. inside each window, cuts so no run of str.isspace() / non-space characters exceeds
//      25,000 (MAX_NO_WHITESPACES_CHARS, _split_whitespaces_or_nonwhitespaces),
//   3. each piece through tiktoken's CoreBPE.encode: split at special tokens (if allowed),
//      pat_str matches, whole-piece lookup, byte-pair merge.
// Mirrors tokenization_kimi.py (encode) and openai/tiktoken src/lib.rs (encode, encode_ordinary).
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace kimi::tok {
namespace {

constexpr size_t kWindowChars = 400000;
constexpr size_t kMaxRun = 25000;

}   // namespace

void Tokenizer::Impl::encode_ordinary(std::string_view segment, std::vector<int32_t>& out) const {
    Splitter sp(segment, pattern);
    std::string_view piece;
    while (sp.next(piece)) bpe_encode_piece(piece, ranks, out);
}

void Tokenizer::Impl::encode_chunk(std::string_view chunk, bool allow_special, std::vector<int32_t>& out) const {
    if (!allow_special) {
        encode_ordinary(chunk, out);
        return;
    }
    // tiktoken: find the leftmost special token, encode the text before it, emit it, repeat.
    // With several specials starting at one position the longest wins (Kimi's never overlap).
    const auto* s = reinterpret_cast<const unsigned char*>(chunk.data());
    const size_t n = chunk.size();
    size_t start = 0, i = 0;
    while (i < n) {
        if (!special_first[s[i]]) {
            ++i;
            continue;
        }
        int32_t id = -1;
        size_t len = 0;
        for (size_t l : special_lengths) {
            if (l > n - i) continue;
            id = find_special(chunk.substr(i, l));
            if (id >= 0) {
                len = l;
                break;
            }
        }
        if (id < 0) {
            ++i;
            continue;
        }
        if (i > start) encode_ordinary(chunk.substr(start, i - start), out);
        out.push_back(id);
        i += len;
        start = i;
    }
    if (start < n) encode_ordinary(chunk.substr(start), out);
}

void Tokenizer::Impl::encode_text(std::string_view text, bool allow_special, std::vector<int32_t>& out) const {
    // A text of at most kMaxRun bytes has at most kMaxRun code points: nothing to cut.
    if (text.size() <= kMaxRun) {
        encode_chunk(text, allow_special, out);
        return;
    }
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const auto* end = s + text.size();
    size_t pos = 0;
    while (pos < text.size()) {   // one 400k-character window per iteration
        size_t slice_start = pos, chars = 0, run = 0;
        bool run_space = false;
        size_t i = pos;
        while (i < text.size() && chars < kWindowChars) {
            uint32_t cp;
            const int len = s[i] < 0x80 ? (cp = s[i], 1) : utf8_decode(s + i, end, cp);
            const bool sp = py_isspace(cp);
            if (chars == 0) run_space = sp;
            if (sp != run_space) {
                run = 1;
                run_space = sp;
            } else if (++run > kMaxRun) {
                encode_chunk(text.substr(slice_start, i - slice_start), allow_special, out);
                slice_start = i;
                run = 1;
            }
            i += size_t(len);
            ++chars;
        }
        encode_chunk(text.substr(slice_start, i - slice_start), allow_special, out);
        pos = i;
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    impl_->encode_text(text, allow_special, out);
    return out;
}

void Tokenizer::encode_append(std::string_view text, bool allow_special, std::vector<int32_t>& out) const {
    impl_->encode_text(text, allow_special, out);
}

}   // namespace kimi::tok
