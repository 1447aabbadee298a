// The tile order (matmul_kernel.h) held bit for bit: the AMX plan (amx_matmul_body.h) on the
// emulated tiles, on every machine, against a scalar rendering of the documented order, for
// bf16 and MXFP4 weights, 1-50 token rows, partial row and token tiles, I % 32 ≠ 0, sub-ranges of
// the outputs and several row blocks; then through ops::matmul / matmul_grouped where the
// process runs the tiles (use_amx: real tiles, or KIMI_ISA=amx-emulated, the ctest
// op_tests_isa_amx_emulated); then real tiles against the emulation where the CPU has them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/amx_support.h"
#include "backend/cpu/matmul_kernel.h"
#include "op_test_util.h"

namespace kimi {
namespace {

using test::Buf;
using test::flush_denormal;

// One output of the tile order: one chain over I padded with zeros to a multiple of 32, each
// element an exact product rounded once into the sum, denormal inputs and sums as zero.
float tile_order(const uint16_t* x, const uint16_t* w, int64_t in) {
    float acc = 0.0f;
    for (int64_t i = 0; i < (in + 31) / 32 * 32; ++i) {
        const float xv = i < in ? flush_denormal(bf16_to_f32(x[i])) : 0.0f;
        const float wv = i < in ? flush_denormal(bf16_to_f32(w[i])) : 0.0f;
        acc = flush_denormal(std::fma(wv, xv, acc));
    }
    return acc;
}

// The weight rows as bf16 bits: as stored, or MXFP4 decoded exactly.
std::vector<uint16_t> weight_bits(const Tensor& w) {
    const int64_t n = w.numel();
    std::vector<uint16_t> out(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e)
        out[size_t(e)] = w.dtype == DType::kBF16
            ? static_cast<const uint16_t*>(w.data)[e]
            : f32_to_bf16(mxfp4_element(static_cast<const uint8_t*>(w.data), w.scale, e));
    return out;
}

// Every y[t, o] for o in [o0, o1) against the order, over x's bf16 bits.
void expect_tile_order(const std::vector<uint16_t>& xb, const Tensor& w, const float* y, int64_t n, int64_t ldy,
                       int64_t o0, int64_t o1, const std::string& what) {
    const int64_t in = w.dim(1);
    const std::vector<uint16_t> wb = weight_bits(w);
    int64_t bad = 0;
    for (int64_t t = 0; t < n; ++t)
        for (int64_t o = o0; o < o1; ++o) {
            const float want = tile_order(xb.data() + t * in, wb.data() + o * in, in), got = y[t * ldy + o];
            if (std::memcmp(&want, &got, 4) != 0 && bad++ < 3)
                ADD_FAILURE() << what << ": y[" << t << ", " << o << "] = " << got << ", the tile order gives " << want;
        }
    EXPECT_EQ(bad, 0) << what;
}

std::vector<uint16_t> bits_of(const Tensor& x) {
    std::vector<uint16_t> xb(static_cast<size_t>(x.numel()));
    for (int64_t e = 0; e < x.numel(); ++e) xb[size_t(e)] = f32_to_bf16(x.f32()[e]);
    return xb;
}

// The plan on emulated tiles: y over [o0, o1) written, the rest untouched (NaN).
void run_emulated(const Tensor& x, const Tensor& w, int64_t o0, int64_t o1, std::vector<float>& y,
                  std::vector<uint16_t>& xb) {
    const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    xb = bits_of(x);
    std::vector<uint16_t> panel(size_t(cpu::amx_panel_elems(n, in)));
    cpu::pack_amx_panel(xb.data(), n, in, panel.data());
    y.assign(size_t(n * out), std::nanf(""));
    cpu::MatmulArgs a{nullptr, n, in, w.data, w.dtype, in, y.data(), out};
    a.w_scale = w.scale;
    a.xb = xb.data();
    a.xt = panel.data();
    cpu::amx_range_emulated(a, o0, o1, nullptr);
}

TEST(TileOrder, EmulatedPlanEqualsTheScalarOrder) {
    Rng rng(441);
    for (DType dt : {DType::kBF16, DType::kMXFP4})
        for (int64_t in : {2, 31, 32, 33, 64, 100, 160})
            for (int64_t out : {1, 16, 17, 45})
                for (int64_t n : {1, 2, 15, 16, 17, 33, 50}) {
                    if (dt == DType::kMXFP4 && in % 32) continue;
                    Buf x(DType::kF32, {n, in}, &rng), w(dt, {out, in}, &rng, 0.05);
                    std::vector<float> y;
                    std::vector<uint16_t> xb;
                    const int64_t o0 = out > 16 ? 3 : 0, o1 = out > 16 ? out - 2 : out;   // a sub-range too
                    run_emulated(x.t, w.t, o0, o1, y, xb);
                    const std::string what = std::string(dtype_name(dt)) + " T=" + std::to_string(n) +
                        " I=" + std::to_string(in) + " O=" + std::to_string(out);
                    expect_tile_order(xb, w.t, y.data(), n, out, o0, o1, what);
                    for (int64_t t = 0; t < n; ++t)   // outside the range: untouched
                        for (int64_t o = 0; o < out; ++o)
                            if (o < o0 || o >= o1) {
                                ASSERT_TRUE(std::isnan(y[size_t(t * out + o)])) << what;
                            }
                }
}

// I large enough that a row block (half of L2) holds fewer rows than the product: several row
// blocks, each MXFP4 block decoded on its own; every MXFP4 scale byte, denormal and zero inputs.
TEST(TileOrder, RowBlocksScalesAndDenormals) {
    Rng rng(442);
    const int64_t in = 16384, out = 70, n = 3;
    for (DType dt : {DType::kBF16, DType::kMXFP4}) {
        Buf x(DType::kF32, {n, in}, &rng), w(dt, {out, in}, &rng, 0.05);
        if (dt == DType::kMXFP4)
            for (size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = uint8_t(i % 256 == 255 ? 0 : i % 256);
        else
            for (int64_t e = 0; e < out * in; e += 7)
                static_cast<uint16_t*>(w.t.data)[e] = uint16_t(e % 2 ? 0x0003 : 0x8000);
        for (int64_t e = 0; e < n * in; e += 5) x.t.f32()[e] = e % 2 ? 1e-39f : 0.0f;
        std::vector<float> y;
        std::vector<uint16_t> xb;
        run_emulated(x.t, w.t, 0, out, y, xb);
        expect_tile_order(xb, w.t, y.data(), n, out, 0, out, dtype_name(dt));
    }
}

// Through the ops, where this process runs the tiles.
class TileOrderOps : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        if (!cpu::use_amx())
            GTEST_SKIP() << "the tiles do not run here (" << cpu::amx_support().why_not
                         << "; KIMI_ISA=amx-emulated runs them emulated: ctest op_tests_isa_amx_emulated)";
    }
    test::Runner r{GetParam()};
};

TEST_P(TileOrderOps, MatmulEqualsTheScalarOrder) {
    Rng rng(443);
    for (DType dt : {DType::kBF16, DType::kMXFP4})
        for (int64_t in : {33, 64, 96})
            for (int64_t n : {1, 4, 5, 17, 40}) {
                if (dt == DType::kMXFP4 && in % 32) continue;
                const int64_t out = 53;
                Buf x(DType::kF32, {n, in}, &rng), w(dt, {out, in}, &rng, 0.05), y(DType::kF32, {n, out});
                ops::matmul(r.ex, x.t, w.t, Precision::kBF16, y.t);
                expect_tile_order(bits_of(x.t), w.t, y.t.f32(), n, out, 0, out,
                                  std::string(dtype_name(dt)) + " T=" + std::to_string(n) + " I=" + std::to_string(in));
                r.arena.reset();
            }
}

TEST_P(TileOrderOps, GroupedEqualsTheScalarOrder) {
    Rng rng(444);
    const int64_t in = 96, out = 45;
    const std::vector<int32_t> starts = {0, 3, 3, 23, 24, 41, 60};
    const int64_t n_groups = int64_t(starts.size()) - 1, rows = starts.back();
    std::vector<Buf> experts;
    std::vector<const Tensor*> ws;
    for (int64_t g = 0; g < n_groups; ++g)
        experts.emplace_back(g % 2 ? DType::kMXFP4 : DType::kBF16, std::initializer_list<int64_t>{out, in}, &rng, 0.1);
    for (int64_t g = 0; g < n_groups; ++g) ws.push_back(&experts[size_t(g)].t);
    Buf x(DType::kF32, {rows, in}, &rng), y(DType::kF32, {rows, out});
    ops::matmul_grouped(r.ex, x.t, ws, starts, Precision::kBF16, y.t);
    for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t r0 = starts[size_t(g)], r1 = starts[size_t(g) + 1];
        if (r0 < r1) {
            const Tensor xg = x.t.rows(r0, r1);
            expect_tile_order(bits_of(xg), *ws[size_t(g)], y.t.f32() + r0 * out, r1 - r0, out, 0, out,
                              "group " + std::to_string(g));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, TileOrderOps, ::testing::Values(1, 2));

// Real tiles: the plan on the instructions gives the emulation's bits.
TEST(TileOrder, RealTilesEqualTheEmulation) {
    if (!cpu::amx_support().usable) GTEST_SKIP() << "no AMX here: " << cpu::amx_support().why_not;
    // Tiles that fail the start-up self-check are not used (the process runs the vector kernels and
    // says why); the instruction-level check is amx_hw_tests (label amx).
    if (!cpu::use_amx() && !cpu::amx_tiles_emulated() && cpu::amx_why_off().find("KIMI_ISA") == std::string::npos)
        GTEST_SKIP() << "the tiles are not used here: " << cpu::amx_why_off();
    Rng rng(445);
    for (DType dt : {DType::kBF16, DType::kMXFP4})
        for (int64_t in : {32, 100, 7168})
            for (int64_t n : {1, 16, 33}) {
                if (dt == DType::kMXFP4 && in % 32) continue;
                const int64_t out = 80;
                Buf x(DType::kF32, {n, in}, &rng), w(dt, {out, in}, &rng, 0.05);
                std::vector<float> y_emu;
                std::vector<uint16_t> xb;
                run_emulated(x.t, w.t, 0, out, y_emu, xb);
                std::vector<uint16_t> panel(size_t(cpu::amx_panel_elems(n, in)));
                cpu::pack_amx_panel(xb.data(), n, in, panel.data());
                std::vector<float> y_hw(size_t(n * out));
                cpu::MatmulArgs a{nullptr, n, in, w.t.data, dt, in, y_hw.data(), out};
                a.w_scale = w.t.scale;
                a.xb = xb.data();
                a.xt = panel.data();
                cpu::amx_range_hw(a, 0, out, nullptr);
                EXPECT_EQ(std::memcmp(y_hw.data(), y_emu.data(), y_hw.size() * 4), 0)
                    << dtype_name(dt) << " T=" << n << " I=" << in;
            }
}

}   // namespace
}   // namespace kimi
