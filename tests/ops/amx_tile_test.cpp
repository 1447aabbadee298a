// The AMX tile emulation (backend/cpu/amx_tile.h) against the documented semantics: exact
// small-integer products, the per-step rounding order of TDPBF16PS (even element, then odd, each
// added on its own), denormal bf16 inputs as zero and denormal f32 results flushed, the shapes the
// instruction refuses, TILELOADD zeroing past the configured rows and bytes. The same semantics
// against real tiles: amx_hw_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/amx_tile.h"
#include "core/error.h"

namespace kimi::cpu::amx {
namespace {

uint16_t bf16_of(float f) {   // exact for the values used here (they are bf16 already)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return uint16_t(u >> 16);
}

// a [m, 2k] bf16 and b [k, 2n] bf16 pairs as tiles, c [m, n] f32 zero.
struct Triple {
    Tile a, b, c;
    Triple(int m, int n, int k, const std::vector<uint16_t>& av, const std::vector<uint16_t>& bv) {
        tile_load(a, m, 4 * k, av.data(), 4 * k);
        tile_load(b, k, 4 * n, bv.data(), 4 * n);
        tile_zero(c, m, 4 * n);
    }
};

TEST(AmxTile, SmallIntegersGiveTheExactDotProduct) {
    const int m = 5, n = 7, k = 9;
    std::vector<uint16_t> av(size_t(m) * 2 * k), bv(size_t(k) * 2 * n);
    for (size_t i = 0; i < av.size(); ++i) av[i] = bf16_of(float(int(i % 13) - 6));
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = bf16_of(float(int(i % 11) - 5));
    Triple t(m, n, k, av, bv);
    tdpbf16ps(t.c, t.a, t.b);
    for (int r = 0; r < m; ++r)
        for (int col = 0; col < n; ++col) {
            double want = 0;
            for (int j = 0; j < 2 * k; ++j)   // a[r][j] · b[j / 2][2 col + j % 2]
                want +=
                    double(int((r * 2 * k + j) % 13) - 6) * double(int(((j / 2) * 2 * n + 2 * col + j % 2) % 11) - 5);
            EXPECT_EQ(t.c.f32(r, col), float(want)) << r << "," << col;
        }
}

TEST(AmxTile, EachProductIsAddedOnItsOwnEvenFirst) {
    // c = 1, then 2^24 · 1 and 1 · 2: one rounding per step gives 2^24 + 2 (1 + 2^24 rounds to
    // 2^24); summing the pair first would give 2^24 + 3, rounded to 2^24 + 4.
    Tile a, b, c;
    const std::vector<uint16_t> av = {bf16_of(16777216.0f), bf16_of(1.0f)}, bv = {bf16_of(1.0f), bf16_of(2.0f)};
    tile_load(a, 1, 4, av.data(), 4);
    tile_load(b, 1, 4, bv.data(), 4);
    const float one = 1.0f;
    tile_load(c, 1, 4, &one, 4);
    tdpbf16ps(c, a, b);
    EXPECT_EQ(c.f32(0, 0), 16777218.0f);
}

TEST(AmxTile, DenormalInputsAreZeroAndDenormalResultsFlushed) {
    Tile a, b, c;
    const uint16_t denormal = 0x0001, big = bf16_of(1e30f);
    std::vector<uint16_t> av = {denormal, bf16_of(1.0f)}, bv = {big, bf16_of(0.0f)};
    tile_load(a, 1, 4, av.data(), 4);
    tile_load(b, 1, 4, bv.data(), 4);
    tile_zero(c, 1, 4);
    tdpbf16ps(c, a, b);
    EXPECT_EQ(c.f32(0, 0), 0.0f) << "a denormal bf16 times 1e30 counts as zero";
    // 2^-70 · 2^-70 = 2^-140, below the smallest normal f32 (2^-126): the sum is flushed.
    av = {bf16_of(0x1p-70f), bf16_of(0.0f)};
    bv = {bf16_of(0x1p-70f), bf16_of(0.0f)};
    tile_load(a, 1, 4, av.data(), 4);
    tile_load(b, 1, 4, bv.data(), 4);
    tile_zero(c, 1, 4);
    tdpbf16ps(c, a, b);
    uint32_t bits;
    const float r = c.f32(0, 0);
    std::memcpy(&bits, &r, 4);
    EXPECT_EQ(bits, 0u) << "2^-140 is a denormal f32: flushed to +0";
}

TEST(AmxTile, ShapesTheInstructionRefuses) {
    Tile a, b, c;
    tile_zero(a, 4, 64);
    tile_zero(b, 16, 32);
    tile_zero(c, 4, 32);
    EXPECT_NO_THROW(tdpbf16ps(c, a, b));
    tile_zero(c, 3, 32);
    EXPECT_THROW(tdpbf16ps(c, a, b), Error);   // c.rows != a.rows
    tile_zero(c, 4, 64);
    EXPECT_THROW(tdpbf16ps(c, a, b), Error);   // c.colsb != b.colsb
    tile_zero(b, 15, 32);
    tile_zero(c, 4, 32);
    EXPECT_THROW(tdpbf16ps(c, a, b), Error);   // a.colsb != 4 b.rows
    EXPECT_THROW(tile_zero(a, 17, 64), Error);
    EXPECT_THROW(tile_zero(a, 1, 66), Error);
}

TEST(AmxTile, LoadZeroesPastTheConfiguredShapeAndStoreWritesOnlyIt) {
    std::vector<uint8_t> src(16 * 100, 0xab), dst(16 * 100, 0x11);
    Tile t;
    tile_load(t, 3, 12, src.data(), 100);
    for (int r = 0; r < kMaxRows; ++r)
        for (int j = 0; j < kMaxColsb; ++j) EXPECT_EQ(t.data[r][j], r < 3 && j < 12 ? 0xab : 0) << r << "," << j;
    tile_store(t, dst.data(), 100);
    for (int r = 0; r < 16; ++r)
        for (int j = 0; j < 100; ++j) EXPECT_EQ(dst[size_t(r) * 100 + size_t(j)], r < 3 && j < 12 ? 0xab : 0x11);
}

}   // namespace
}   // namespace kimi::cpu::amx
