// The vision tower's ops: GELU (tanh and erf forms), the 2-D RoPE of the fused qkv, its
// attention scores and weighted values (AVX-512 BF16: kernels/attn_avx512.cpp) and the row
// softmax between them. ref: docs/vision.md#tower.
// The tower evaluates GELU on every MLP unit of every patch and softmax on n² scores per head,
// so both use an exp the compiler vectorizes (no libm call per element; this file is built
// with -fno-trapping-math so that its clamps if-convert) and fixed-lane sums (the same order on
// every machine and thread count).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul_kernel.h"
#include "core/arena.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kGrain = 4096;   // elements per task
constexpr int kLanes = 16;         // partial sums / maxima of a row, combined in a fixed order

// e^x for finite x (clamped to [-87.3, 88.7], where e^x stays a normal float), within 2 ulp:
// x = k·ln2 + r with |r| ≤ ln2/2 (ln2 split in two for an exact k·ln2), e^r by the Cephes
// degree-6 polynomial, 2^k through the exponent bits. Branch-free, so loops over it vectorize.
inline float exp_approx(float x) {
    x = std::min(88.7f, std::max(-87.3f, x));
    // k = round(x / ln2): adding 1.5·2^23 leaves the integer part in the mantissa (|x/ln2| < 2^22)
    const float kf = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const int32_t k = int32_t(kf);
    const float r = (x - kf * 0.693359375f) + kf * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const int32_t bits = (k + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
// The hot loops, cloned per instruction set (the best one picked at load time; each clone does
// the same IEEE operations in the same order, so results do not depend on the machine).
#define KIMI_VEC_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]

KIMI_VEC_CLONES void gelu_tanh_range(float* v, int64_t n) {
    // 0.5·(1 + tanh(u)) = sigmoid(2u): x / (1 + e^(−2u)), u = √(2/π)(x + 0.044715x³)
    constexpr float k2 = 2.0f * 0.7978845608028654f;
    for (int64_t i = 0; i < n; ++i) {
        const float a = v[i];
        v[i] = a / (1.0f + exp_approx(-k2 * (a + 0.044715f * a * a * a)));
    }
}

KIMI_VEC_CLONES void softmax_row(float* v, int64_t cols, float scale) {
    const int64_t whole = cols / kLanes * kLanes;
    float lane[kLanes];
    std::fill_n(lane, kLanes, -INFINITY);
    for (int64_t j = 0; j < whole; j += kLanes)
        for (int l = 0; l < kLanes; ++l) lane[l] = lane[l] > v[j + l] ? lane[l] : v[j + l];
    float m = -INFINITY;
    for (int l = 0; l < kLanes; ++l) m = std::max(m, lane[l]);
    for (int64_t j = whole; j < cols; ++j) m = std::max(m, v[j]);
    m *= scale;   // scale > 0: the maximum of the scaled row
    for (int64_t j = 0; j < cols; ++j) v[j] = exp_approx(v[j] * scale - m);
    std::fill_n(lane, kLanes, 0.0f);
    for (int64_t j = 0; j < whole; j += kLanes)
        for (int l = 0; l < kLanes; ++l) lane[l] += v[j + l];
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += lane[l];
    for (int64_t j = whole; j < cols; ++j) sum += v[j];
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < cols; ++j) v[j] *= inv;
}

}   // namespace

void gelu_inplace(Exec& ex, Tensor& x, bool tanh_approx) {
    float* const data = x.f32();
    const int64_t n = x.numel();
    ex.pool->parallel_ranges((n + kGrain - 1) / kGrain, [data, n, tanh_approx](int64_t b0, int64_t b1, int) {
        float* const v = data;
        const int64_t begin = b0 * kGrain, end = std::min(n, b1 * kGrain);
        if (tanh_approx) {
            gelu_tanh_range(v + begin, end - begin);
        } else {
            for (int64_t i = begin; i < end; ++i) v[i] = 0.5f * v[i] * (1.0f + std::erf(v[i] * 0.70710678118654752f));
        }
    });
}

void rope_2d(Exec& ex, Tensor& qkv, int64_t n_heads, int64_t head_dim, int64_t grid_w) {
    const int64_t n = qkv.dim(0), width = qkv.dim(1), quarter = head_dim / 4;
    auto freq = std::vector<double>(size_t(quarter));
    for (int64_t k = 0; k < quarter; ++k) freq[size_t(k)] = std::pow(10000.0, -4.0 * double(k) / double(head_dim));
    ex.pool->parallel_for(n, [&](int64_t t) {
        const double row = double(t / grid_w), col = double(t % grid_w);
        float* x = qkv.f32() + t * width;
        for (int64_t k = 0; k < quarter; ++k) {
            // pair 2k turns by column·f_k, pair 2k+1 by row·f_k
            const float c0 = float(std::cos(col * freq[size_t(k)])), s0 = float(std::sin(col * freq[size_t(k)]));
            const float c1 = float(std::cos(row * freq[size_t(k)])), s1 = float(std::sin(row * freq[size_t(k)]));
            for (int64_t part = 0; part < 2 * n_heads; ++part) {   // the q heads, then the k heads
                float* p = x + part * head_dim + 4 * k;
                const float a0 = p[0], b0 = p[1], a1 = p[2], b1 = p[3];
                p[0] = a0 * c0 - b0 * s0;
                p[1] = a0 * s0 + b0 * c0;
                p[2] = a1 * c1 - b1 * s1;
                p[3] = a1 * s1 + b1 * c1;
            }
        }
    });
}

void attention_scores(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& k, Precision p, float* s,
                      int64_t lds) {
    if (p == Precision::kBF16 && k.dtype == DType::kBF16 && use_avx512_bf16() && !use_amx())
        return attention_scores_avx512_bf16(ex, x, n_rows, ldx, k, s, lds);
    matmul_strided(ex, x, n_rows, ldx, k, p, s, lds);   // elsewhere (the tiles too): the matrix products
}

void attention_values(Exec& ex, const float* p, int64_t n_rows, int64_t ldp, const Tensor& v, Precision prec, float* o,
                      int64_t ldo) {
    if (prec == Precision::kBF16 && v.dtype == DType::kBF16 && use_avx512_bf16() && !use_amx())
        return attention_values_avx512_bf16(ex, p, n_rows, ldp, v, o, ldo);
    // elsewhere: the matrix-product kernels on the values transposed ([Dv, N], scratch)
    const int64_t n = v.dim(0), width = v.dim(1);
    Tensor vt = ex.arena->alloc(v.dtype, {width, n});
    const size_t es = dtype_size(v.dtype);
    ex.pool->parallel_for(width, [&](int64_t c) {
        for (int64_t j = 0; j < n; ++j)
            std::memcpy(static_cast<char*>(vt.data) + size_t(c * n + j) * es,
                        static_cast<const char*>(v.data) + size_t(j * width + c) * es, es);
    });
    matmul_strided(ex, p, n_rows, ldp, vt, prec, o, ldo);
}

void softmax_rows(Exec& ex, Tensor& x, float scale) {
    const int64_t cols = x.dim(1);
    ex.pool->parallel_for(x.dim(0), [&](int64_t r) { softmax_row(x.f32() + r * cols, cols, scale); });
}

}   // namespace kimi::cpu
