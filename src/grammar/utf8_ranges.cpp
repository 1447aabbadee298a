// UTF-8 sequences of code-point ranges (see utf8_ranges.h).
#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace kimi::grammar {

namespace {
int encode(uint32_t cp, uint8_t* out) {
    if (cp < 0x80) return out[0] = uint8_t(cp), 1;
    if (cp < 0x800) return out[0] = uint8_t(0xC0 | cp >> 6), out[1] = uint8_t(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return out[0] = uint8_t(0xE0 | cp >> 12), out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F)),
               out[2] = uint8_t(0x80 | (cp & 0x3F)), 3;
    out[0] = uint8_t(0xF0 | cp >> 18), out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
    out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F)), out[3] = uint8_t(0x80 | (cp & 0x3F));
    return 4;
}

// [lo, hi] with the same encoded length: split until every byte position is a plain range.
void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
    if (hi < 0x80) return out.push_back({{uint8_t(lo), uint8_t(hi)}});
    // The largest aligned block that starts at lo: continuation bytes below a position span
    // the full 80-BF only when lo and hi agree above it.
    for (int i = 1; i < 4; ++i) {
        const uint32_t m = (1u << (6 * i)) - 1;   // the low i continuation bytes
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {   // lo is not at the start of a block
                split(lo, lo | m, out);
                split((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {   // hi is not at the end of a block
                split(lo, (hi & ~m) - 1, out);
                split(hi & ~m, hi, out);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    const int n = encode(lo, a);
    encode(hi, b);
    Utf8Sequence s(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) s[size_t(i)] = {a[i], b[i]};
    out.push_back(std::move(s));
}
}   // namespace

std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi) {
    std::vector<Utf8Sequence> out;
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    // surrogates are not characters
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800)
            for (auto& s : utf8_sequences(lo, 0xD7FF)) out.push_back(std::move(s));
        if (hi > 0xDFFF)
            for (auto& s : utf8_sequences(0xE000, hi)) out.push_back(std::move(s));
        return out;
    }
    for (const uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {   // one encoded length at a time
        if (lo <= edge && hi > edge) {
            split(lo, edge, out);
            for (auto& s : utf8_sequences(edge + 1, hi)) out.push_back(std::move(s));
            return out;
        }
    }
    if (lo <= hi) split(lo, hi, out);
    return out;
}

std::vector<std::pair<uint32_t, uint32_t>> complement(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    uint32_t next = 0;
    for (const auto& [lo, hi] : ranges) {
        if (lo > next) out.push_back({next, lo - 1});
        next = std::max(next, hi + 1);
    }
    if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
    return out;
}

}   // namespace kimi::grammar
