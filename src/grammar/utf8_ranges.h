// Code-point ranges as UTF-8 byte-range sequences: [U+0080, U+07FF] is the two-byte sequences
// [C2-DF][80-BF], and so on. Grammars match bytes, so a token that ends inside a multi-byte
// character simply leaves the matcher between two byte positions.
// ref: the Utf8Sequences construction of Rust's regex-syntax and RE2's UTF-8 compiler.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace kimi::grammar {

struct ByteRange {
    uint8_t lo = 0, hi = 0;
};
using Utf8Sequence = std::vector<ByteRange>;   // 1 to 4 byte ranges, one per byte

// The byte sequences whose UTF-8 decodings are exactly the code points in [lo, hi] (surrogates
// D800-DFFF excluded; hi ≤ 10FFFF).
std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi);

// The code points not in the sorted, merged ranges (over 0-10FFFF, surrogates excluded).
std::vector<std::pair<uint32_t, uint32_t>> complement(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

}   // namespace kimi::grammar
