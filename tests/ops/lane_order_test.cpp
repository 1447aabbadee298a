// The lane order (matmul_kernel.h) held bit for bit: on a CPU with AVX-512 BF16, every bf16 ×
// bf16 product (bf16 activations) must equal a scalar rendering of the documented order, one
// output at a time, whatever the token count (the direct path up to kOuterDirectMaxRows rows,
// the activation panel above), the weight rows, odd or short I, or the grouping of rows.
// Skipped with the reason elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_kernel.h"
#include "op_test_util.h"

namespace kimi {
namespace {

using test::Buf;
using test::flush_denormal;

// One output of the lane order: 8 chains over the 16-element steps (chain c: pair c of each
// step, the odd product then the even one, each an exact product rounded once into the sum),
// the fixed tree over the chains, then the tail in order.
float lane_order(const uint16_t* x, const uint16_t* w, int64_t in) {
    const auto v = [](const uint16_t* p, int64_t i) { return flush_denormal(bf16_to_f32(p[i])); };
    float c[8] = {};
    for (int64_t s = 0; s < in / 16; ++s)
        for (int64_t k = 0; k < 8; ++k) {
            const int64_t e = 16 * s + 2 * k;
            c[k] = flush_denormal(std::fma(v(x, e + 1), v(w, e + 1), c[k]));
            c[k] = flush_denormal(std::fma(v(x, e), v(w, e), c[k]));
        }
    float y = ((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7]));
    for (int64_t i = in - in % 16; i < in; ++i) y += bf16_to_f32(x[i]) * bf16_to_f32(w[i]);
    return y;
}

// Every element of y [n, out] against the scalar order over x rounded to bf16 and w's bits.
void expect_lane_order(const Tensor& x, const Tensor& w, const Tensor& y, const std::string& what) {
    const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    std::vector<uint16_t> xb(static_cast<size_t>(in));
    const auto* wb = static_cast<const uint16_t*>(w.data);
    int64_t bad = 0;
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < in; ++i) xb[size_t(i)] = f32_to_bf16(x.f32()[t * in + i]);
        for (int64_t o = 0; o < out; ++o) {
            const float want = lane_order(xb.data(), wb + o * in, in), got = y.f32()[t * out + o];
            if (std::memcmp(&want, &got, 4) != 0 && bad++ < 3)
                ADD_FAILURE() << what << ": y[" << t << ", " << o << "] = " << got << ", the lane order gives " << want;
        }
    }
    EXPECT_EQ(bad, 0) << what;
}

class LaneOrder : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        if (!cpu::kernel_takes_bf16_bits(DType::kBF16) || cpu::use_amx())
            GTEST_SKIP()
                << "no AVX-512 BF16 kernels (the CPU lacks AVX-512 BF16, KIMI_ISA lowers it, or the tiles run)";
    }
    test::Runner r{GetParam()};
};

TEST_P(LaneOrder, MatmulEqualsTheScalarOrder) {
    Rng rng(31);
    for (int64_t in : {1, 2, 3, 31, 32, 33, 64, 255, 256, 257, 300, 1001})
        for (int64_t out : {1, 17, 70})
            for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 16, 17, 50}) {
                Buf x(DType::kF32, {n, in}, &rng), w(DType::kBF16, {out, in}, &rng, 0.05), y(DType::kF32, {n, out});
                ops::matmul(r.ex, x.t, w.t, Precision::kBF16, y.t);
                expect_lane_order(x.t, w.t, y.t,
                                  "T=" + std::to_string(n) + " I=" + std::to_string(in) + " O=" + std::to_string(out));
                r.arena.reset();
            }
}

// Denormal and zero activations and weights: read as zero, as vdpbf16ps reads them.
TEST_P(LaneOrder, DenormalsAndZeros) {
    Rng rng(32);
    const int64_t in = 70, out = 20;
    for (int64_t n : {1, 12}) {
        Buf x(DType::kF32, {n, in}, &rng), w(DType::kBF16, {out, in}, &rng, 0.05), y(DType::kF32, {n, out});
        auto* wb = static_cast<uint16_t*>(w.t.data);
        for (int64_t e = 0; e < out * in; e += 3) wb[e] = uint16_t(e % 2 ? 0x0003 : 0x8000);   // denormal, −0
        for (int64_t e = 0; e < n * in; e += 5) x.t.f32()[e] = e % 2 ? 1e-39f : 0.0f;
        ops::matmul(r.ex, x.t, w.t, Precision::kBF16, y.t);
        expect_lane_order(x.t, w.t, y.t, "denormals T=" + std::to_string(n));
        r.arena.reset();
    }
}

// Rows grouped per expert: each group's rows in the order, groups of every size side by side.
TEST_P(LaneOrder, GroupedEqualsTheScalarOrder) {
    Rng rng(33);
    const int64_t in = 333, out = 45;
    const std::vector<int32_t> starts = {0, 3, 3, 23, 24, 41, 50};
    const int64_t n_groups = int64_t(starts.size()) - 1, rows = starts.back();
    std::vector<Buf> experts;
    std::vector<const Tensor*> ws;
    for (int64_t g = 0; g < n_groups; ++g)
        experts.emplace_back(DType::kBF16, std::initializer_list<int64_t>{out, in}, &rng, 0.1);
    for (int64_t g = 0; g < n_groups; ++g) ws.push_back(&experts[size_t(g)].t);
    Buf x(DType::kF32, {rows, in}, &rng), y(DType::kF32, {rows, out});
    ops::matmul_grouped(r.ex, x.t, ws, starts, Precision::kBF16, y.t);
    for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t r0 = starts[size_t(g)], r1 = starts[size_t(g) + 1];
        if (r0 < r1)
            expect_lane_order(x.t.rows(r0, r1), *ws[size_t(g)], y.t.rows(r0, r1), "group " + std::to_string(g));
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, LaneOrder, ::testing::Values(1, 2));

}   // namespace
}   // namespace kimi
