// MXFP4 weights in the matrix-product kernels: exact decode of every nibble and of the extreme
// scale bytes, products against the float64 reference, and bit-for-bit agreement of the
// kernel paths (1-row vs many-row products), for both activation precisions. Runs for every
// ISA the machine has (the suite repeats it under KIMI_ISA=avx2 and scalar).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/ref/ref_ops.h"
#include "core/rng.h"
#include "ops/ops.h"
#include "test_models.h"

namespace kimi {
namespace {

// An MXFP4 weight [out, in] with its own storage.
struct Mxfp4 {
    std::vector<uint8_t> packed, scale;
    Tensor t;
    Mxfp4(int64_t out, int64_t in) : packed(size_t(out * in / 2)), scale(size_t(out * in / kMxfp4Group)) {
        t = Tensor(packed.data(), DType::kMXFP4, {out, in});
        t.scale = scale.data();
    }
    void set(int64_t e, uint8_t nibble) {
        uint8_t& b = packed[size_t(e / 2)];
        b = (e & 1) ? uint8_t((b & 0x0f) | (nibble << 4)) : uint8_t((b & 0xf0) | nibble);
    }
};

Mxfp4 random_mxfp4(Rng& rng, int64_t out, int64_t in) {
    Mxfp4 w(out, in);
    for (auto& b : w.packed) b = uint8_t(rng.below(256));
    for (auto& s : w.scale) s = uint8_t(118 + rng.below(12));   // 2^-9 .. 2^2: typical weight scales
    return w;
}

std::vector<float> dense(const Tensor& w) {
    std::vector<float> d(size_t(w.numel()));
    for (int64_t i = 0; i < w.numel(); ++i) d[size_t(i)] = element_f32(w, i);
    return d;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 1e-6, d = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        m = std::max(m, double(std::fabs(b[i])));
        d = std::max(d, double(std::fabs(a[i] - b[i])));
    }
    return d / m;
}

class Mxfp4Ops : public ::testing::TestWithParam<int> {
protected:
    test::Runner r{GetParam()};
};

TEST(Mxfp4Format, ScalarDecode) {
    const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (uint8_t n = 0; n < 16; ++n) {
        EXPECT_EQ(std::fabs(e2m1_to_f32(n)), mag[n & 7]) << int(n);
        EXPECT_EQ(std::signbit(e2m1_to_f32(n)), (n & 8) != 0) << int(n);
    }
    EXPECT_EQ(e8m0_to_f32(127), 1.0f);
    EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.0f, -127));
    EXPECT_EQ(e8m0_to_f32(254), std::ldexp(1.0f, 127));
    EXPECT_EQ(e8m0_to_f32(128 + 3), 16.0f);
    // the even column in the low nibble
    const uint8_t packed[1] = {0x5a}, scale[1] = {127};
    EXPECT_EQ(mxfp4_element(packed, scale, 0), e2m1_to_f32(0xa));
    EXPECT_EQ(mxfp4_element(packed, scale, 1), e2m1_to_f32(0x5));
}

// A one-hot activation reads one weight column: every nibble value under scale bytes 0, 1,
// 127 and 254 (the largest magnitudes under 254 overflow f32, so those rows keep |v| ≤ 1.5).
// The weights are exact; 1.0 is exact in bf16, so both precisions must return them.
TEST_P(Mxfp4Ops, DecodeIsExact) {
    const int64_t in = 64, out = 8;
    Mxfp4 w(out, in);
    const uint8_t scales[4] = {0, 1, 127, 254};
    for (int64_t o = 0; o < out; ++o) {
        for (int64_t g = 0; g < in / kMxfp4Group; ++g) w.scale[size_t(o * 2 + g)] = scales[(o + g) % 4];
        for (int64_t i = 0; i < in; ++i) {
            uint8_t n = uint8_t((i + o) % 16);
            if (w.scale[size_t(o * 2 + i / kMxfp4Group)] == 254) n &= 0xb;   // magnitudes 0..1.5, both signs
            w.set(o * in + i, n);
        }
    }
    for (Precision p : {Precision::kF32, Precision::kBF16})
        for (int64_t n_rows : {1, 2, 7}) {   // the direct and the blocked paths
            std::vector<float> x(size_t(n_rows * in), 0.0f), y(size_t(n_rows * out));
            for (int64_t c = 0; c < in; c += 5) {
                std::fill(x.begin(), x.end(), 0.0f);
                for (int64_t t = 0; t < n_rows; ++t) x[size_t(t * in + c)] = 1.0f;
                Tensor xt(x.data(), DType::kF32, {n_rows, in}), yt(y.data(), DType::kF32, {n_rows, out});
                ops::matmul(r.ex, xt, w.t, p, yt);
                for (int64_t t = 0; t < n_rows; ++t)
                    for (int64_t o = 0; o < out; ++o) {
                        const float want = mxfp4_element(w.packed.data(), w.scale.data(), o * in + c);
                        const float got = y[size_t(t * out + o)];
                        // vdpbf16ps (the bf16 path on AVX-512 BF16) treats subnormal inputs as zero,
                        // as it does for bf16 weights: values under 2^-126 (scale bytes 0 and 1) may read 0.
                        if (p == Precision::kBF16 && std::fpclassify(want) == FP_SUBNORMAL && got == 0.0f) continue;
                        ASSERT_EQ(got, want) << "col " << c << " row " << o << " n=" << n_rows << (p == Precision::kBF16 ? " bf16" : " f32");
                    }
            }
        }
}

TEST_P(Mxfp4Ops, ProductsMatchTheReference) {
    Rng rng(31);
    for (auto [t, in, out] : {std::tuple{1, 32, 5}, {2, 64, 17}, {3, 96, 9}, {5, 544, 33}, {9, 2304, 13}, {16, 160, 100}})
        for (Precision p : {Precision::kF32, Precision::kBF16}) {
            Mxfp4 w = random_mxfp4(rng, out, in);
            std::vector<float> x(size_t(t * in)), y(size_t(t * out)), yr(size_t(t * out));
            for (auto& v : x) v = float(rng.normal());
            Tensor xt(x.data(), DType::kF32, {t, in}), yt(y.data(), DType::kF32, {t, out}), yrt(yr.data(), DType::kF32, {t, out});
            ops::matmul(r.ex, xt, w.t, p, yt);
            ref::matmul(xt, w.t, p, yrt);
            EXPECT_LT(rel_err(y, yr), 2e-6) << "T=" << t << " I=" << in << " O=" << out << (p == Precision::kBF16 ? " bf16" : " f32");
            // the f32 path equals the product with the dequantized weights, as widened BF16
            if (p == Precision::kF32) {
                std::vector<uint16_t> wb(size_t(out * in));
                const std::vector<float> wd = dense(w.t);
                for (size_t i = 0; i < wd.size(); ++i) wb[i] = f32_to_bf16(wd[i]);
                Tensor wbt(wb.data(), DType::kBF16, {out, in});
                std::vector<float> yb(size_t(t * out));
                Tensor ybt(yb.data(), DType::kF32, {t, out});
                ops::matmul(r.ex, xt, wbt, p, ybt);
                EXPECT_EQ(0, std::memcmp(yb.data(), y.data(), y.size() * 4)) << "MXFP4 vs its bf16 dequantization, I=" << in;
            }
        }
}

TEST_P(Mxfp4Ops, PathsAgreeBitForBit) {
    Rng rng(32);
    for (Precision p : {Precision::kF32, Precision::kBF16})
        for (auto [in, out] : {std::pair{2304, 53}, {544, 100}, {96, 7}}) {
            const int64_t max_t = 21;
            Mxfp4 w = random_mxfp4(rng, out, in);
            std::vector<float> x(size_t(max_t * in));
            for (auto& v : x) v = float(rng.normal());
            std::vector<float> single(size_t(max_t * out));
            for (int64_t t = 0; t < max_t; ++t) {
                Tensor xt(x.data() + t * in, DType::kF32, {1, in}), yt(single.data() + t * out, DType::kF32, {1, out});
                ops::matmul(r.ex, xt, w.t, p, yt);
            }
            for (int64_t n : {2, 3, 4, 5, 8, 16, 17, 21}) {
                std::vector<float> y(size_t(n * out));
                Tensor xt(x.data(), DType::kF32, {n, in}), yt(y.data(), DType::kF32, {n, out});
                ops::matmul(r.ex, xt, w.t, p, yt);
                ASSERT_EQ(0, std::memcmp(y.data(), single.data(), y.size() * 4))
                    << "n=" << n << " I=" << in << (p == Precision::kBF16 ? " bf16" : " f32");
            }
        }
}

TEST_P(Mxfp4Ops, GroupedExpertsMatchSeparateProducts) {
    Rng rng(33);
    const int64_t in = 128, out = 40;
    std::vector<Mxfp4> experts;
    for (int e = 0; e < 3; ++e) experts.push_back(random_mxfp4(rng, out, in));
    const std::vector<int32_t> starts{0, 3, 3, 8};   // expert 1 gets no tokens
    std::vector<float> x(size_t(8 * in)), y(size_t(8 * out));
    for (auto& v : x) v = float(rng.normal());
    const Tensor* ws[3] = {&experts[0].t, &experts[1].t, &experts[2].t};
    Tensor xt(x.data(), DType::kF32, {8, in}), yt(y.data(), DType::kF32, {8, out});
    for (Precision p : {Precision::kF32, Precision::kBF16}) {
        ops::matmul_grouped(r.ex, xt, ws, starts, p, yt);
        for (int g = 0; g < 3; ++g) {
            const int64_t n = starts[size_t(g) + 1] - starts[size_t(g)];
            if (n == 0) continue;
            std::vector<float> yg(size_t(n * out));
            Tensor xg(x.data() + starts[size_t(g)] * in, DType::kF32, {n, in}), ygt(yg.data(), DType::kF32, {n, out});
            ops::matmul(r.ex, xg, experts[size_t(g)].t, p, ygt);
            EXPECT_EQ(0, std::memcmp(yg.data(), y.data() + starts[size_t(g)] * out, yg.size() * 4)) << "expert " << g;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, Mxfp4Ops, ::testing::Values(1, 2));

}  // namespace
}  // namespace kimi
