// Element-wise ops: residual add, embedding gather, sigmoid (and the sigmoid output gate),
// SiLU·mul and SiTU·mul, the KDA forget gates. ref: docs/model.md#kda-gates (gate: −exp(A_log)·
// softplus(f + dt_bias), threshold 20), docs/model.md#moe, docs/model.md#k3-kda (lower-bound gate), docs/model.md#situ (SiTU).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kGrain = 4096;   // elements per task for flat element-wise loops

template <class Fn>
void flat_parallel(Exec& ex, int64_t n, Fn&& fn) {
    ex.pool->parallel_ranges((n + kGrain - 1) / kGrain, [&](int64_t b0, int64_t b1, int) {
        const int64_t end = std::min(n, b1 * kGrain);
        for (int64_t i = b0 * kGrain; i < end; ++i) fn(i);
    });
}
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
inline float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}   // namespace

void add_inplace(Exec& ex, Tensor& acc, const Tensor& a) {
    float* y = acc.f32();
    const float* x = a.f32();
    flat_parallel(ex, acc.numel(), [&](int64_t i) { y[i] += x[i]; });
}

void embedding(Exec& ex, const Tensor& table, std::span<const int32_t> ids, Tensor& y) {
    const int64_t d = table.dim(1);
    float* ys = y.f32();
    ex.pool->parallel_for(int64_t(ids.size()), [&](int64_t t) {
        const int64_t base = int64_t(ids[size_t(t)]) * d;
        float* yr = ys + t * d;
        if (table.dtype == DType::kF32) {
            std::memcpy(yr, table.f32() + base, size_t(d) * sizeof(float));
        } else if (is_block_quant(table.dtype)) {
            decode_row_f32(table, ids[size_t(t)], yr);   // GGUF: embeddings are often quantized
        } else {
            for (int64_t i = 0; i < d; ++i) yr[i] = element_f32(table, base + i);
        }
    });
}

void sigmoid_inplace(Exec& ex, Tensor& x) {
    float* v = x.f32();
    flat_parallel(ex, x.numel(), [&](int64_t i) { v[i] = sigmoidf(v[i]); });
}

void mul_sigmoid_inplace(Exec& ex, Tensor& x, const Tensor& gate) {
    float* v = x.f32();
    const float* g = gate.f32();
    flat_parallel(ex, x.numel(), [&](int64_t i) { v[i] *= sigmoidf(g[i]); });
}

void silu_mul(Exec& ex, const Tensor& gate, const Tensor& up, Tensor& y) {
    const float *g = gate.f32(), *u = up.f32();
    float* o = y.f32();
    flat_parallel(ex, y.numel(), [&](int64_t i) { o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i]; });
}

void situ_mul(Exec& ex, const Tensor& gate, const Tensor& up, float beta, float linear_beta, Tensor& y) {
    const float *g = gate.f32(), *u = up.f32();
    float* o = y.f32();
    const float inv_beta = 1.0f / beta, inv_lin = linear_beta > 0.0f ? 1.0f / linear_beta : 0.0f;
    flat_parallel(ex, y.numel(), [&](int64_t i) {
        const float a = beta * std::tanh(g[i] * inv_beta) * sigmoidf(g[i]);
        const float b = linear_beta > 0.0f ? linear_beta * std::tanh(u[i] * inv_lin) : u[i];
        o[i] = a * b;
    });
}

void kda_gate(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, Tensor& g) {
    const int64_t hk = f.dim(1), n_heads = neg_exp_a.numel(), k = hk / n_heads;
    const float *fs = f.f32(), *a = neg_exp_a.f32(), *bias = dt_bias.f32();
    float* gs = g.f32();
    flat_parallel(ex, f.numel(), [&](int64_t i) {
        const int64_t c = i % hk;
        gs[i] = a[c / k] * softplus(fs[i] + bias[c]);
    });
}

void kda_gate_lower_bound(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, float lower_bound,
                          Tensor& g) {
    const int64_t hk = f.dim(1), n_heads = neg_exp_a.numel(), k = hk / n_heads;
    const float *fs = f.f32(), *a = neg_exp_a.f32(), *bias = dt_bias.f32();
    float* gs = g.f32();
    flat_parallel(ex, f.numel(), [&](int64_t i) {
        const int64_t c = i % hk;
        gs[i] = lower_bound * sigmoidf(-a[c / k] * (fs[i] + bias[c]));
    });
}

}   // namespace kimi::cpu
