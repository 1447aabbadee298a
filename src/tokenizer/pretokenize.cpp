// The pat_str matcher (see pretokenize.h). Each alternative is decided by one forward scan;
// the backtracking of the regex is reproduced by remembering the last position where a shorter
// match would have succeeded (the last lower-set letter inside an upper-set run, the last
// \r or \n inside a whitespace run, the start of the last whitespace character).
// Mirrors: openai/tiktoken src/lib.rs (find_iter over fancy-regex) with Kimi's pat_str.
#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace kimi::tok {
namespace {

// Derived bits, per pattern.
enum : unsigned char {
    dA = 1,      // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (Kimi: && not Han)
    dB = 2,      // [\p{Ll}\p{Lm}\p{Lo}\p{M}]       (Kimi: && not Han)
    dP = 4,      // [^\r\n\p{L}\p{N}]
    dQ = 8,      // [^\s\p{L}\p{N}]
    dN = 16,     // \p{N}
    dS = 32,     // \s
    dH = 64,     // \p{Han} run (Kimi only)
    dNL = 128,   // [\r\n]
};

struct Derived {
    unsigned char kimi[128];
    unsigned char o200k[128];
    Derived() {
        for (unsigned c = 0; c < 128; ++c) {
            kimi[c] = make(c, true);
            o200k[c] = make(c, false);
        }
    }
    static unsigned char make(unsigned c, bool kimi) {
        unsigned char d = 0;
        const bool han = kimi && (c & kHan);
        if ((c & kUpperSet) && !han) d |= dA;
        if ((c & kLowerSet) && !han) d |= dB;
        if (!(c & (kCrLf | kLetter | kNumber))) d |= dP;
        if (!(c & (kSpace | kLetter | kNumber))) d |= dQ;
        if (c & kNumber) d |= dN;
        if (c & kSpace) d |= dS;
        if (han) d |= dH;
        if (c & kCrLf) d |= dNL;
        return d;
    }
};

const Derived& derived_tables() {
    static const Derived d;
    return d;
}

struct Cursor {
    const unsigned char* s;
    size_t n;
    const unsigned char* derived;
    // Derived bits and length of the character at p (p < n).
    inline unsigned char at(size_t p, int& len) const {
        const unsigned c = s[p];
        if (c < 0x80) {
            len = 1;
            return derived[kAsciiClass[c]];
        }
        uint32_t cp;
        len = utf8_decode(s + p, s + n, cp);
        return derived[cp_class_slow(cp)];
    }
    inline unsigned char at(size_t p) const {
        int len;
        return at(p, len);
    }
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)? at p: returns the end of the optional suffix.
    size_t contraction(size_t p) const {
        if (p + 1 >= n || s[p] != '\'') return p;
        const unsigned c = s[p + 1] | 0x20u;
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return p + 2;
        // U+017F LATIN SMALL LETTER LONG S case-folds to 's'.
        if (s[p + 1] == 0xC5 && p + 2 < n && s[p + 2] == 0xBF) return p + 3;
        if (p + 2 < n) {
            const unsigned c2 = s[p + 2] | 0x20u;
            if ((c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l')) return p + 3;
        }
        return p;
    }
    // Alternative 2 with the optional prefix either taken (q after it) or not (q == p).
    // Returns the end of the match or 0 on failure (a match is never empty).
    size_t alt2_from(size_t q) const {
        size_t pos = q, last_b_end = 0;
        int len;
        unsigned char d = 0;
        while (pos < n && ((d = at(pos, len)) & dA)) {
            if (d & dB) last_b_end = pos + size_t(len);
            pos += size_t(len);
        }
        if (pos < n && (d & dB)) {   // a lower-set letter right after the upper-set run
            pos += size_t(len);
            while (pos < n && (at(pos, len) & dB)) pos += size_t(len);
            return contraction(pos);
        }
        if (last_b_end) return contraction(last_b_end);
        return 0;
    }
    size_t alt3_from(size_t q) const {
        int len;
        if (q >= n || !(at(q, len) & dA)) return 0;
        size_t pos = q + size_t(len);
        while (pos < n && (at(pos, len) & dA)) pos += size_t(len);
        while (pos < n && (at(pos, len) & dB)) pos += size_t(len);
        return contraction(pos);
    }
};

}   // namespace

const char* pattern_regex(Pattern p) {
    if (p == Pattern::kimi)
        return R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    return R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

Splitter::Splitter(std::string_view text, Pattern pattern)
    : s_(reinterpret_cast<const unsigned char*>(text.data())),
      n_(text.size()),
      derived_(pattern == Pattern::kimi ? derived_tables().kimi : derived_tables().o200k),
      slash_tail_(pattern == Pattern::o200k) {}

bool Splitter::next(std::string_view& piece) {
    if (pos_ >= n_) return false;
    const size_t end = match_at(pos_);
    piece = std::string_view(reinterpret_cast<const char*>(s_) + pos_, end - pos_);
    pos_ = end;
    return true;
}

size_t Splitter::match_at(size_t p) const {
    const Cursor c{s_, n_, derived_};
    int len0;
    const unsigned char d0 = c.at(p, len0);
    const size_t after0 = p + size_t(len0);

    if (d0 & dH) {   // 1: [\p{Han}]+
        size_t pos = after0;
        int len;
        while (pos < n_ && (c.at(pos, len) & dH)) pos += size_t(len);
        return pos;
    }
    if (d0 & (dA | dB | dP)) {
        // 2: the optional prefix is greedy, so first with it, then without.
        if (d0 & dP)
            if (size_t e = c.alt2_from(after0)) return e;
        if (d0 & (dA | dB))
            if (size_t e = c.alt2_from(p)) return e;
        // 3
        if (d0 & dP)
            if (size_t e = c.alt3_from(after0)) return e;
        if (d0 & dA)
            if (size_t e = c.alt3_from(p)) return e;
    }
    if (d0 & dN) {   // 4: \p{N}{1,3}
        size_t pos = after0;
        int len;
        for (int k = 1; k < 3 && pos < n_ && (c.at(pos, len) & dN); ++k) pos += size_t(len);
        return pos;
    }
    // 5:  ?[^\s\p{L}\p{N}]+[\r\n]*
    size_t q = 0;
    bool have_q = false;
    if (s_[p] == ' ' && after0 < n_ && (c.at(after0) & dQ)) {
        q = after0;
        have_q = true;
    } else if (d0 & dQ) {
        q = p;
        have_q = true;
    }
    if (have_q) {
        size_t pos = q;
        int len;
        while (pos < n_ && (c.at(pos, len) & dQ)) pos += size_t(len);
        while (pos < n_ && (s_[pos] == '\r' || s_[pos] == '\n' || (slash_tail_ && s_[pos] == '/'))) ++pos;
        return pos;
    }
    // d0 is whitespace here (every other character matched above).
    // 6: \s*[\r\n]+  7: \s+(?!\S)  8: \s+
    size_t pos = p, last_nl_end = 0, last_start = p;
    int len;
    unsigned char d;
    while (pos < n_ && ((d = c.at(pos, len)) & dS)) {
        if (d & dNL) last_nl_end = pos + 1;
        last_start = pos;
        pos += size_t(len);
    }
    if (last_nl_end) return last_nl_end;
    if (pos >= n_) return pos;
    if (last_start > p) return last_start;
    return pos;
}

}   // namespace kimi::tok
