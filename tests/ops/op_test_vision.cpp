// The vision tower's ops against their scalar references: GELU (both forms), the 2-D RoPE of
// the fused qkv (and its defining facts), the row softmax.
#include "op_test_util.h"

namespace kimi {
namespace {

using test::Buf;
using test::rel_err;

// max |a − b| / max |b| over rows × cols of two outputs ld floats apart.
double strided_rel_err(const std::vector<float>& a, const std::vector<float>& b, int64_t rows, int64_t cols,
                       int64_t ld) {
    double worst = 0, scale = 1e-6;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            worst = std::max(worst, double(std::fabs(a[size_t(i * ld + j)] - b[size_t(i * ld + j)])));
            scale = std::max(scale, double(std::fabs(b[size_t(i * ld + j)])));
        }
    return worst / scale;
}

class VisionOps : public ::testing::TestWithParam<int> {
protected:
    test::Runner r{GetParam()};
};

TEST_P(VisionOps, GeluInplace) {
    Rng rng(21);
    for (int64_t n : {1, 17, 9001})
        for (bool tanh_approx : {true, false}) {
            Buf x(DType::kF32, {n}, &rng, 3.0), xr(x);
            ops::gelu_inplace(r.ex, x.t, tanh_approx);
            ref::gelu_inplace(r.ex, xr.t, tanh_approx);
            EXPECT_LT(rel_err(x.t, xr.t), 2e-6) << "n=" << n << " tanh=" << tanh_approx;
        }
    Buf one(DType::kF32, {3});   // gelu(0) = 0, gelu(x) → x for large x, → 0 for very negative x
    one.f()[0] = 0.0f, one.f()[1] = 12.0f, one.f()[2] = -12.0f;
    ops::gelu_inplace(r.ex, one.t, false);
    EXPECT_EQ(one.f()[0], 0.0f);
    EXPECT_FLOAT_EQ(one.f()[1], 12.0f);
    EXPECT_NEAR(one.f()[2], 0.0f, 1e-20);
}

TEST_P(VisionOps, Rope2d) {
    Rng rng(22);
    for (auto [t, h, hd, gw] : {std::tuple{1, 1, 4, 1}, {12, 2, 16, 4}, {35, 3, 8, 7}, {64, 2, 128, 8}}) {
        Buf x(DType::kF32, {t, 3 * h * hd}, &rng), xr(x), x0(x);
        ops::rope_2d(r.ex, x.t, h, hd, gw);
        ref::rope_2d(r.ex, xr.t, h, hd, gw);
        EXPECT_LT(rel_err(x.t, xr.t), 1e-5) << "T=" << t << " hd=" << hd;
        const int64_t w = 3 * h * hd;
        for (int64_t i = 0; i < t; ++i) {
            for (int64_t c = 2 * h * hd; c < w; ++c) EXPECT_EQ(x.f()[i * w + c], x0.f()[i * w + c]);   // v untouched
            for (int64_t part = 0; part < 2 * h; ++part)   // a rotation keeps each pair's length
                for (int64_t j = 0; j < hd / 2; ++j) {
                    const float* a = x.f() + i * w + part * hd + 2 * j;
                    const float* b = x0.f() + i * w + part * hd + 2 * j;
                    EXPECT_NEAR(std::hypot(a[0], a[1]), std::hypot(b[0], b[1]), 1e-5);
                }
        }
        for (int64_t c = 0; c < w; ++c) EXPECT_EQ(x.f()[c], x0.f()[c]);   // token 0 sits at (0, 0)
    }
}

TEST_P(VisionOps, SoftmaxRows) {
    Rng rng(23);
    for (auto [rows, cols] : {std::pair{1, 1}, {5, 33}, {9, 4099}}) {
        Buf x(DType::kF32, {rows, cols}, &rng, 8.0), xr(x);
        ops::softmax_rows(r.ex, x.t, 0.125f);
        ref::softmax_rows(r.ex, xr.t, 0.125f);
        EXPECT_LT(rel_err(x.t, xr.t), 2e-6) << rows << "x" << cols;
        for (int64_t i = 0; i < rows; ++i) {
            double sum = 0.0;
            for (int64_t j = 0; j < cols; ++j) sum += x.f()[i * cols + j];
            EXPECT_NEAR(sum, 1.0, 1e-5);
        }
    }
}

// Scores over a head's width: against the reference's product (bf16: the same rounded inputs, so
// only the order of the sums differs); strided rows; 1 and 2 threads bit for bit.
TEST_P(VisionOps, AttentionScores) {
    Rng rng(24);
    for (auto [rows, keys, width] : {std::tuple{1, 1, 2}, {9, 17, 16}, {13, 40, 128}, {256, 75, 64}})
        for (Precision p : {Precision::kBF16, Precision::kF32})
            for (DType kt : {DType::kBF16, DType::kF32}) {
                const int64_t ldx = width + 5, lds = keys + 3;
                Buf x(DType::kF32, {rows, ldx}, &rng), k(kt, {keys, width}, &rng);
                std::vector<float> s(size_t(rows * lds), 0.0f), sr(s), s1(s);
                ops::attention_scores(r.ex, x.f(), rows, ldx, k.t, p, s.data(), lds);
                ref::attention_scores(r.ex, x.f(), rows, ldx, k.t, p, sr.data(), lds);
                EXPECT_LT(strided_rel_err(s, sr, rows, keys, lds), 1e-5) << rows << "x" << keys << "x" << width;
                test::Runner one(1);
                ops::attention_scores(one.ex, x.f(), rows, ldx, k.t, p, s1.data(), lds);
                EXPECT_EQ(std::memcmp(s.data(), s1.data(), s.size() * sizeof(float)), 0) << "threads change the bits";
            }
}

// Weighted values over the keys: against the reference (the same rounded weights in bf16);
// odd key counts and widths that are not multiples of 16; 1 and 2 threads bit for bit.
TEST_P(VisionOps, AttentionValues) {
    Rng rng(25);
    for (auto [rows, keys, width] :
         {std::tuple{1, 1, 1}, {4, 17, 16}, {7, 40, 12}, {256, 75, 128}, {5, 301, 40}, {4, 1201, 136}})
        for (Precision p : {Precision::kBF16, Precision::kF32})
            for (DType vt : {DType::kBF16, DType::kF32}) {
                const int64_t ldp = keys + 2, ldo = width + 3;
                Buf w(DType::kF32, {rows, ldp}, &rng), v(vt, {keys, width}, &rng);
                std::vector<float> o(size_t(rows * ldo), 0.0f), orf(o), o1(o);
                ops::attention_values(r.ex, w.f(), rows, ldp, v.t, p, o.data(), ldo);
                ref::attention_values(r.ex, w.f(), rows, ldp, v.t, p, orf.data(), ldo);
                EXPECT_LT(strided_rel_err(o, orf, rows, width, ldo), 1e-5) << rows << "x" << keys << "x" << width;
                test::Runner one(1);
                ops::attention_values(one.ex, w.f(), rows, ldp, v.t, p, o1.data(), ldo);
                EXPECT_EQ(std::memcmp(o.data(), o1.data(), o.size() * sizeof(float)), 0) << "threads change the bits";
            }
}

INSTANTIATE_TEST_SUITE_P(Threads, VisionOps, ::testing::Values(1, 2));

}   // namespace
}   // namespace kimi
