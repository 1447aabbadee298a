// dequantize_blocks / block_element (src/core/quant_blocks.h) on hand-made blocks whose values are
// worked out below; the bit-exact comparison with ggml's decoders for every type and every code
// is tests/gguf/dequant_oracle_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quant_blocks.h"

namespace kimi {
namespace {

void put_f16(std::vector<uint8_t>& b, size_t at, uint16_t h) {
    b[at] = uint8_t(h & 0xff);
    b[at + 1] = uint8_t(h >> 8);
}

constexpr uint16_t kHalf = 0x3800;   // f16 0.5
constexpr uint16_t kOne = 0x3C00;    // f16 1.0
constexpr uint16_t kTwo = 0x4000;    // f16 2.0

std::vector<float> decode(DType t, const std::vector<uint8_t>& block) {
    std::vector<float> y(size_t(dtype_block(t).elems));
    dequantize_blocks(t, block.data(), y.data(), int64_t(y.size()));
    return y;
}

TEST(QuantBlocks, Q8_0) {
    // d = 0.5, then 32 int8 values: y[j] = q[j] * 0.5.
    std::vector<uint8_t> b(34, 0);
    put_f16(b, 0, kHalf);
    const int8_t q[5] = {-128, -1, 0, 1, 127};
    for (int j = 0; j < 5; ++j) b[2 + size_t(j)] = uint8_t(q[j]);
    const std::vector<float> y = decode(DType::kQ8_0, b);
    EXPECT_EQ(y[0], -64.0f);   // -128 * 0.5
    EXPECT_EQ(y[1], -0.5f);    // -1 * 0.5
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[3], 0.5f);
    EXPECT_EQ(y[4], 63.5f);   // 127 * 0.5
    EXPECT_EQ(y[31], 0.0f);
}

TEST(QuantBlocks, Q4_0) {
    // d = 2, 16 bytes: value j is (low nibble of byte j - 8) * d, value j + 16 the high nibble's.
    std::vector<uint8_t> b(18, 0x88);   // nibbles 8: value 0
    put_f16(b, 0, kTwo);
    b[2] = 0x1F;   // byte 0: low 15 -> (15 - 8) * 2 = 14 (y[0]); high 1 -> (1 - 8) * 2 = -14 (y[16])
    b[3] = 0x80;   // byte 1: low 0 -> -16 (y[1]); high 8 -> 0 (y[17])
    const std::vector<float> y = decode(DType::kQ4_0, b);
    EXPECT_EQ(y[0], 14.0f);
    EXPECT_EQ(y[16], -14.0f);
    EXPECT_EQ(y[1], -16.0f);
    EXPECT_EQ(y[17], 0.0f);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[31], 0.0f);
}

TEST(QuantBlocks, Q4_K) {
    // d = 1, dmin = 0.5, 12 scale bytes, 128 bytes of nibbles. Sub-block s (32 values) is
    // d*sc[s]*q - dmin*m[s]; sub-blocks 2k and 2k+1 are the low and high nibbles of bytes 32k..32k+31.
    std::vector<uint8_t> b(144, 0);
    put_f16(b, 0, kOne);
    put_f16(b, 2, kHalf);
    uint8_t* sc = &b[4];
    sc[0] = 0x43;   // sub-block 0: sc = 0x43 & 63 = 3; its top bits (1) are sub-block 4's scale bits 4..5
    sc[4] = 2;      // sub-block 0: m = 2 -> dmin * 2 = 1
    sc[1] = 5;      // sub-block 1: sc = 5
    sc[5] = 4;      // sub-block 1: m = 4 -> 2
    sc[8] = 0x21;   // sub-block 4: sc = (0x21 & 15) | (0x43 >> 6) << 4 = 1 | 16 = 17; m = (0x21 >> 4) | 0 = 2 -> 1
    uint8_t* qs = &b[16];
    qs[0] = 0x72;    // y[0] = 3*2 - 1 = 5; y[32] = 5*7 - 2 = 33
    qs[64] = 0x09;   // y[128] = 17*9 - 1 = 152; y[160] (sub-block 5: sc = m = 0) = 0
    const std::vector<float> y = decode(DType::kQ4_K, b);
    EXPECT_EQ(y[0], 5.0f);
    EXPECT_EQ(y[1], -1.0f);   // 3*0 - 1
    EXPECT_EQ(y[32], 33.0f);
    EXPECT_EQ(y[33], -2.0f);   // 5*0 - 2
    EXPECT_EQ(y[128], 152.0f);
    EXPECT_EQ(y[129], -1.0f);   // 17*0 - 1
    EXPECT_EQ(y[160], 0.0f);
    EXPECT_EQ(y[64], 0.0f);   // sub-block 2: sc = m = 0
}

TEST(QuantBlocks, IQ4_NL) {
    // d = 0.5, nibbles index {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}.
    std::vector<uint8_t> b(18, 0x88);   // index 8: 0.5 * 1 = 0.5
    put_f16(b, 0, kHalf);
    b[2] = 0xF0;   // y[0] = 0.5 * -127 = -63.5; y[16] = 0.5 * 113 = 56.5
    b[5] = 0x79;   // y[3] = 0.5 * 13 = 6.5; y[19] = 0.5 * -10 = -5
    const std::vector<float> y = decode(DType::kIQ4_NL, b);
    EXPECT_EQ(y[0], -63.5f);
    EXPECT_EQ(y[16], 56.5f);
    EXPECT_EQ(y[3], 6.5f);
    EXPECT_EQ(y[19], -5.0f);
    EXPECT_EQ(y[1], 0.5f);
    EXPECT_EQ(y[31], 0.5f);
}

TEST(QuantBlocks, BadArgumentsThrow) {
    std::vector<uint8_t> b(2 * 18, 0);
    std::vector<float> y(64);
    EXPECT_THROW(dequantize_blocks(DType::kQ4_0, b.data(), y.data(), 31), Error);   // not a whole block
    EXPECT_THROW(dequantize_blocks(DType::kQ4_0, b.data(), y.data(), -32), Error);
    EXPECT_THROW(dequantize_blocks(DType::kF32, b.data(), y.data(), 4), Error);   // not a block type
    EXPECT_THROW(dequantize_blocks(DType::kMXFP4, b.data(), y.data(), 32), Error);
    EXPECT_THROW(block_element(DType::kQ4_0, b.data(), 48, 0), Error);   // row not whole blocks
    EXPECT_THROW(block_element(DType::kBF16, b.data(), 32, 0), Error);
    EXPECT_NO_THROW(dequantize_blocks(DType::kQ4_0, b.data(), y.data(), 64));
    EXPECT_NO_THROW(dequantize_blocks(DType::kQ4_0, b.data(), y.data(), 0));
}

TEST(QuantBlocks, BlockElementMatchesDequantizeOnAMatrix) {
    // Every block type: a 3 x (2 blocks) matrix of pseudo-random bytes; every element of
    // block_element, bit for bit, is the row-major value dequantize_blocks gives.
    uint64_t state = 0x9e3779b97f4a7c15ull;
    auto next_byte = [&state] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return uint8_t(state >> 56);
    };
    for (int ti = int(DType::kQ4_0); ti <= int(DType::kTQ2_0); ++ti) {
        const DType t = DType(ti);
        ASSERT_TRUE(is_block_quant(t));
        const BlockShape blk = dtype_block(t);
        const int64_t rows = 3, row_elems = 2 * blk.elems, n = rows * row_elems;
        std::vector<uint8_t> data(static_cast<size_t>(rows * 2 * blk.bytes));
        for (uint8_t& v : data) v = next_byte();
        std::vector<float> all(static_cast<size_t>(n));
        dequantize_blocks(t, data.data(), all.data(), n);
        for (int64_t e = 0; e < n; ++e) {
            const float v = block_element(t, data.data(), row_elems, e);
            uint32_t a, b;
            std::memcpy(&a, &v, 4);
            std::memcpy(&b, &all[size_t(e)], 4);
            ASSERT_EQ(a, b) << dtype_name(t) << " element " << e;
        }
    }
}

}   // namespace
}   // namespace kimi

// Every IEEE half → f32: the value (sign · 2^(e−15) · 1.m, or sign · m · 2^-24 for subnormals,
// computed in double) and, for NaNs, the payload kept in the top mantissa bits; the round trip
// back through f32_to_f16 gives the same half (NaNs quieted).
TEST(QuantBlocks, F16ToF32IsExactForEveryHalf) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = kimi::f16_to_f32(uint16_t(h));
        const int e = int(h >> 10) & 31, m = int(h & 1023);
        const double sign = (h & 0x8000) ? -1.0 : 1.0;
        if (e == 31) {
            uint32_t u;
            std::memcpy(&u, &f, 4);
            ASSERT_EQ(u, ((h & 0x8000u) << 16) | 0x7f800000u | (uint32_t(m) << 13)) << h;
            continue;
        }
        const double want =
            e == 0 ? sign * m * std::ldexp(1.0, -24) : sign * (1.0 + m / 1024.0) * std::ldexp(1.0, e - 15);
        ASSERT_EQ(double(f), want) << h;
        ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << h;
        ASSERT_EQ(kimi::f32_to_f16(f), uint16_t(h)) << h;
    }
}
