// The AMX tile emulation (backend/cpu/amx_tile.h) held to real tiles: random tiles of five shape
// classes through TDPBF16PS on the hardware (kernels/amx_hw.cpp) and through the emulation must
// give the same bits. Skipped, with the reason printed, where the process cannot use the tiles.
// Label `amx`, outside `make test` until it has passed on an AMX machine (`ctest -L amx` there).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/amx_support.h"
#include "backend/cpu/amx_tile.h"
#include "core/rng.h"

namespace kimi::cpu::amx {
namespace {

uint16_t bf16_bits(float f) {   // truncated: any bf16 value will do
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return uint16_t(u >> 16);
}

TEST(AmxHardware, EmulationEqualsTheTiles) {
    const AmxSupport& s = amx_support();
    if (!s.usable) GTEST_SKIP() << "no AMX here: " << s.why_not;
    Rng rng(44);
    for (const auto [m, n, k] : {std::array<int, 3>{16, 16, 16}, {1, 16, 16}, {7, 5, 3}, {16, 1, 1}, {2, 9, 13}}) {
        std::vector<uint16_t> av(size_t(m) * 2 * k), bv(size_t(k) * 2 * n);
        for (auto& v : av) v = bf16_bits(float(rng.uniform(-2.0, 2.0)));
        for (auto& v : bv) v = bf16_bits(float(rng.uniform(-2.0, 2.0)));
        std::vector<float> c0(size_t(m) * n);
        for (auto& v : c0) v = float(rng.uniform());
        Tile a, b, c;
        tile_load(a, m, 4 * k, av.data(), 4 * k);
        tile_load(b, k, 4 * n, bv.data(), 4 * n);
        tile_load(c, m, 4 * n, c0.data(), 4 * n);
        tdpbf16ps(c, a, b);
        std::vector<float> hw = c0;
        tdpbf16ps_hw(hw.data(), m, n, av.data(), bv.data(), k);
        for (int r = 0; r < m; ++r)
            for (int col = 0; col < n; ++col) {
                const float e = c.f32(r, col), h = hw[size_t(r) * n + size_t(col)];
                EXPECT_EQ(std::memcmp(&e, &h, 4), 0)
                    << m << "x" << n << "x" << k << " at " << r << "," << col << ": emulated " << e << ", tiles " << h;
            }
    }
}

}   // namespace
}   // namespace kimi::cpu::amx
