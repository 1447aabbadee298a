// The vision tower's element-wise ops: GELU (tanh and erf forms), the 2-D RoPE of the fused
// qkv, and the row softmax of its attention scores. ref: docs/vision.md#tower.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kGrain = 4096;   // elements per task
}   // namespace

void gelu_inplace(Exec& ex, Tensor& x, bool tanh_approx) {
    float* v = x.f32();
    const int64_t n = x.numel();
    ex.pool->parallel_ranges((n + kGrain - 1) / kGrain, [&](int64_t b0, int64_t b1, int) {
        const int64_t end = std::min(n, b1 * kGrain);
        if (tanh_approx) {
            constexpr float k = 0.7978845608028654f;   // √(2/π)
            for (int64_t i = b0 * kGrain; i < end; ++i) {
                const float a = v[i];
                v[i] = 0.5f * a * (1.0f + std::tanh(k * (a + 0.044715f * a * a * a)));
            }
        } else {
            for (int64_t i = b0 * kGrain; i < end; ++i) v[i] = 0.5f * v[i] * (1.0f + std::erf(v[i] * 0.70710678118654752f));
        }
    });
}

void rope_2d(Exec& ex, Tensor& qkv, int64_t n_heads, int64_t head_dim, int64_t grid_w) {
    const int64_t n = qkv.dim(0), width = qkv.dim(1), quarter = head_dim / 4;
    // the angle step of frequency k, in double then rounded once (as the reference's f32 table)
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

void softmax_rows(Exec& ex, Tensor& x, float scale) {
    const int64_t cols = x.dim(1);
    ex.pool->parallel_for(x.dim(0), [&](int64_t r) {
        float* v = x.f32() + r * cols;
        float m = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) m = std::max(m, v[j] * scale);
        float sum = 0.0f;
        for (int64_t j = 0; j < cols; ++j) sum += (v[j] = std::exp(v[j] * scale - m));
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < cols; ++j) v[j] *= inv;
    });
}

}   // namespace kimi::cpu
