// MXFP4 weights in the matrix-product kernels: exact decode of every nibble and of the extreme
// scale bytes, products against the float64 reference, bit-for-bit agreement of the kernel
// paths (1-row vs many-row products, grouped vs separate), for both activation precisions,
// and on AVX-512 BF16 the bit-for-bit equality of the MXFP4 kernel with the bf16-weight kernel
// on span-permuted operands. Runs for every ISA the machine has (the suite repeats it under
// KIMI_ISA=avx2 and scalar).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_kernel.h"
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

// Rows o % 3 == 0 get extreme scale bytes (0, 1, 2, 252, 253, 254) in some groups. `bounded`:
// magnitudes there kept ≤ 3 (253) or ≤ 1.5 (254), so no value overflows f32; else any nibble
// (6 · 2^127 and up read as inf).
void add_extreme_scales(Rng& rng, Mxfp4& w, int64_t out, int64_t in, bool bounded) {
    const uint8_t extreme[6] = {0, 1, 2, 252, 253, 254};
    const int64_t groups = in / kMxfp4Group;
    for (int64_t o = 0; o < out; o += 3)
        for (int64_t g = 0; g < groups; ++g) {
            if ((o + g) % 2 != 0) continue;
            const uint8_t s = extreme[(o / 3 + g) % 6];
            w.scale[size_t(o * groups + g)] = s;
            if (!bounded || s < 253) continue;
            for (int64_t i = 0; i < kMxfp4Group; ++i) {
                const int64_t e = o * in + g * kMxfp4Group + i;
                uint8_t n = uint8_t(rng.below(16));
                if (s == 253) n &= 0xd;   // magnitudes 4, 6 → 2, 3
                if (s == 254) n &= 0xb;   // magnitudes ≤ 1.5
                w.set(e, n);
            }
        }
}

// The span order of the AVX-512 BF16 MXFP4 kernel (matmul_kernel.h): position 32n + w of each
// full span of 128 columns holds column 4w + n; a partial span keeps its order. col[i]: the
// column at position i.
std::vector<int64_t> span_order(int64_t in) {
    std::vector<int64_t> col(static_cast<size_t>(in));
    for (int64_t i = 0; i < in; ++i) col[size_t(i)] = i;
    for (int64_t k = 0; k + 128 <= in; k += 128)
        for (int64_t n = 0; n < 4; ++n)
            for (int64_t w = 0; w < 32; ++w) col[size_t(k + 32 * n + w)] = k + 4 * w + n;
    return col;
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
                        ASSERT_EQ(got, want) << "col " << c << " row " << o << " n=" << n_rows
                                             << (p == Precision::kBF16 ? " bf16" : " f32");
                    }
            }
        }
}

TEST_P(Mxfp4Ops, ProductsMatchTheReference) {
    Rng rng(31);
    for (auto [t, in, out] :
         {std::tuple{1, 32, 5}, {2, 64, 17}, {3, 96, 9}, {5, 544, 33}, {9, 2304, 13}, {16, 160, 100}})
        for (Precision p : {Precision::kF32, Precision::kBF16}) {
            Mxfp4 w = random_mxfp4(rng, out, in);
            std::vector<float> x(size_t(t * in)), y(size_t(t * out)), yr(size_t(t * out));
            for (auto& v : x) v = float(rng.normal());
            Tensor xt(x.data(), DType::kF32, {t, in}), yt(y.data(), DType::kF32, {t, out}),
                yrt(yr.data(), DType::kF32, {t, out});
            ops::matmul(r.ex, xt, w.t, p, yt);
            ref::matmul(r.ex, xt, w.t, p, yrt);
            EXPECT_LT(rel_err(y, yr), 2e-6)
                << "T=" << t << " I=" << in << " O=" << out << (p == Precision::kBF16 ? " bf16" : " f32");
            // the f32 path equals the product with the dequantized weights, as widened BF16
            if (p == Precision::kF32) {
                std::vector<uint16_t> wb(size_t(out * in));
                const std::vector<float> wd = dense(w.t);
                for (size_t i = 0; i < wd.size(); ++i) wb[i] = f32_to_bf16(wd[i]);
                Tensor wbt(wb.data(), DType::kBF16, {out, in});
                std::vector<float> yb(size_t(t * out));
                Tensor ybt(yb.data(), DType::kF32, {t, out});
                ops::matmul(r.ex, xt, wbt, p, ybt);
                EXPECT_EQ(0, std::memcmp(yb.data(), y.data(), y.size() * 4))
                    << "MXFP4 vs its bf16 dequantization, I=" << in;
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

// K3's 7168-wide rows over 130 token rows (the blocked path, several row blocks): each row
// still equals its one-row product.
TEST_P(Mxfp4Ops, WideRowsAgreeBitForBit) {
    Rng rng(34);
    const int64_t in = 7168, out = 21, n = 130;
    Mxfp4 w = random_mxfp4(rng, out, in);
    std::vector<float> x(size_t(n * in)), y(size_t(n * out)), one(static_cast<size_t>(out));
    for (auto& v : x) v = float(rng.normal());
    for (Precision p : {Precision::kF32, Precision::kBF16}) {
        Tensor xt(x.data(), DType::kF32, {n, in}), yt(y.data(), DType::kF32, {n, out});
        ops::matmul(r.ex, xt, w.t, p, yt);
        for (int64_t t = 0; t < n; t += 9) {
            Tensor x1(x.data() + t * in, DType::kF32, {1, in}), onet(one.data(), DType::kF32, {1, out});
            ops::matmul(r.ex, x1, w.t, p, onet);
            ASSERT_EQ(0, std::memcmp(one.data(), y.data() + t * out, size_t(out) * 4))
                << "row " << t << (p == Precision::kBF16 ? " bf16" : " f32");
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

// The 16-lane dot order of the AVX-512 BF16 MXFP4 kernel (matmul_kernel.h) on bf16 operands
// x and w (I a multiple of 32), in scalar: lane l sums pair l of each 32-element chunk (odd
// product, then even, each rounded; denormal inputs and results as zero), then the lanes
// upper half onto lower, twice, then (a0 + a2) + (a1 + a3).
float dot_order(const uint16_t* x, const uint16_t* w, int64_t in) {
    const auto v = [](const uint16_t* p, int64_t i) {
        const uint16_t b = (p[i] & 0x7f80) == 0 ? uint16_t(p[i] & 0x8000) : p[i];
        return bf16_to_f32(b);
    };
    const auto ftz = [](float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; };
    float l[16] = {};
    for (int64_t c = 0; c < in; c += 32)
        for (int64_t k = 0; k < 16; ++k) {
            l[k] = ftz(std::fma(v(x, c + 2 * k + 1), v(w, c + 2 * k + 1), l[k]));
            l[k] = ftz(std::fma(v(x, c + 2 * k), v(w, c + 2 * k), l[k]));
        }
    float s[8], a[4];
    for (int i = 0; i < 8; ++i) s[i] = l[i] + l[i + 8];
    for (int i = 0; i < 4; ++i) a[i] = s[i] + s[i + 4];
    return (a[0] + a[2]) + (a[1] + a[3]);
}

// AVX-512 BF16: the bf16 MXFP4 product is, bit for bit, the 16-lane dot order over the
// permuted activations P·x and the permuted weights P·W dequantized to bf16, on the direct
// (1-3 token rows) and the blocked path, with partial spans, and with extreme scale bytes
// (exact decode, inf weights included) in some rows.
TEST_P(Mxfp4Ops, Bf16KernelIsTheDotOrderOnPermutedOperands) {
    if (!cpu::kernel_takes_bf16_bits(DType::kMXFP4) || cpu::use_amx())
        GTEST_SKIP() << "AVX-512 BF16 kernels off (the CPU lacks AVX-512 BF16, KIMI_ISA lowers it, or the tiles run)";
    Rng rng(34);
    const int64_t out = 37;   // 2 threads: rows 0-23 and 24-36, so 8-, 4- and 1-row tiles
    for (int64_t in : {32, 96, 128, 160, 1152, 2304})
        for (bool extreme : {false, true}) {
            Mxfp4 w = random_mxfp4(rng, out, in);
            if (extreme) add_extreme_scales(rng, w, out, in, false);
            const std::vector<int64_t> col = span_order(in);
            std::vector<uint16_t> wp(size_t(out * in));
            for (int64_t o = 0; o < out; ++o)
                for (int64_t i = 0; i < in; ++i)
                    wp[size_t(o * in + i)] =
                        f32_to_bf16(mxfp4_element(w.packed.data(), w.scale.data(), o * in + col[size_t(i)]));
            for (int64_t t : {1, 2, 3, 5, 16}) {
                std::vector<float> x(size_t(t * in)), y(size_t(t * out)), yp(size_t(t * out));
                std::vector<uint16_t> xp(size_t(t * in));
                for (auto& v : x) v = float(rng.normal());
                for (int64_t r = 0; r < t; ++r)
                    for (int64_t i = 0; i < in; ++i)
                        xp[size_t(r * in + i)] = f32_to_bf16(x[size_t(r * in + col[size_t(i)])]);
                for (int64_t r = 0; r < t; ++r)
                    for (int64_t o = 0; o < out; ++o)
                        yp[size_t(r * out + o)] = dot_order(xp.data() + r * in, wp.data() + o * in, in);
                Tensor xt(x.data(), DType::kF32, {t, in}), yt(y.data(), DType::kF32, {t, out});
                ops::matmul(r.ex, xt, w.t, Precision::kBF16, yt);
                ASSERT_EQ(0, std::memcmp(y.data(), yp.data(), y.size() * 4))
                    << "I=" << in << " T=" << t << (extreme ? " extreme" : "");
            }
        }
}

// Scale bytes 0, 1, 2, 252, 253, 254 mixed into some rows (the others take every byte in
// [2, 252]): the product stays within f32 rounding of the float64 reference (bf16 activations
// may flush subnormal weights to zero, which the bound absorbs), and the other rows do not
// change when those rows are replaced (AVX-512 BF16: every tile then takes the exact decode
// instead of the fast one, so the two agree on every such scale byte).
TEST_P(Mxfp4Ops, ExtremeScalesAreExact) {
    Rng rng(35);
    const int64_t out = 37;
    for (int64_t in : {160, 1152})
        for (Precision p : {Precision::kF32, Precision::kBF16}) {
            Mxfp4 w = random_mxfp4(rng, out, in);
            for (size_t i = 0; i < w.scale.size(); ++i) w.scale[i] = uint8_t(2 + (i * 7) % 251);
            Mxfp4 plain = w;
            plain.t = Tensor(plain.packed.data(), DType::kMXFP4, {out, in});
            plain.t.scale = plain.scale.data();
            add_extreme_scales(rng, w, out, in, true);
            for (int64_t t : {1, 2, 5}) {
                std::vector<float> x(size_t(t * in)), y(size_t(t * out)), yr(size_t(t * out)), y_plain(size_t(t * out));
                for (auto& v : x) v = std::ldexp(float(rng.normal()), -10);
                Tensor xt(x.data(), DType::kF32, {t, in}), yt(y.data(), DType::kF32, {t, out}),
                    yrt(yr.data(), DType::kF32, {t, out});
                Tensor ypt(y_plain.data(), DType::kF32, {t, out});
                ops::matmul(r.ex, xt, w.t, p, yt);
                ref::matmul(r.ex, xt, w.t, p, yrt);
                ops::matmul(r.ex, xt, plain.t, p, ypt);
                for (int64_t r0 = 0; r0 < t; ++r0)
                    for (int64_t o = 0; o < out; ++o) {
                        double bound = 0;
                        for (int64_t i = 0; i < in; ++i) {
                            const float xv = x[size_t(r0 * in + i)];
                            bound += std::fabs(double(p == Precision::kBF16 ? round_to_bf16(xv) : xv) *
                                               element_f32(w.t, o * in + i));
                        }
                        const size_t at = size_t(r0 * out + o);
                        ASSERT_TRUE(std::isfinite(y[at])) << "o=" << o;
                        EXPECT_LE(std::fabs(double(y[at]) - double(yr[at])), 1e-5 * bound + 1e-30)
                            << "I=" << in << " T=" << t << " o=" << o << (p == Precision::kBF16 ? " bf16" : " f32");
                        if (o % 3 != 0) {
                            ASSERT_EQ(y[at], y_plain[at]) << "row " << o << " changed with its neighbours' scales";
                        }
                    }
            }
        }
}

// Grouped experts of mixed dtypes (MXFP4 with a partial span, bf16, f32): each expert's rows
// as its separate product, so every expert got the activation copy it needs.
TEST_P(Mxfp4Ops, GroupedMixedDtypesMatchSeparateProducts) {
    Rng rng(36);
    const int64_t in = 160, out = 29;
    Mxfp4 m0 = random_mxfp4(rng, out, in), m1 = random_mxfp4(rng, out, in);
    std::vector<uint16_t> wb(size_t(out * in));
    std::vector<float> wf(size_t(out * in));
    for (auto& v : wb) v = f32_to_bf16(float(rng.normal()));
    for (auto& v : wf) v = float(rng.normal());
    Tensor bt(wb.data(), DType::kBF16, {out, in}), ft(wf.data(), DType::kF32, {out, in});
    const Tensor* ws[4] = {&m0.t, &bt, &m1.t, &ft};
    for (const std::vector<int32_t>& starts :
         {std::vector<int32_t>{0, 1, 4, 9, 10}, {0, 6, 6, 7, 10}, {0, 0, 10, 10, 10}}) {
        std::vector<float> x(size_t(10 * in)), y(size_t(10 * out));
        for (auto& v : x) v = float(rng.normal());
        Tensor xt(x.data(), DType::kF32, {10, in}), yt(y.data(), DType::kF32, {10, out});
        for (Precision p : {Precision::kF32, Precision::kBF16}) {
            ops::matmul_grouped(r.ex, xt, ws, starts, p, yt);
            for (int g = 0; g < 4; ++g) {
                const int64_t n = starts[size_t(g) + 1] - starts[size_t(g)];
                if (n == 0) continue;
                std::vector<float> yg(size_t(n * out));
                Tensor xg(x.data() + starts[size_t(g)] * in, DType::kF32, {n, in}),
                    ygt(yg.data(), DType::kF32, {n, out});
                ops::matmul(r.ex, xg, *ws[g], p, ygt);
                EXPECT_EQ(0, std::memcmp(yg.data(), y.data() + starts[size_t(g)] * out, yg.size() * 4))
                    << "expert " << g << (p == Precision::kBF16 ? " bf16" : " f32");
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, Mxfp4Ops, ::testing::Values(1, 2));

}   // namespace
}   // namespace kimi
