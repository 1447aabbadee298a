// Normalizations: RMSNorm, per-head L2 norm (fla l2norm: x·rsqrt(Σx²+eps)), and the KDA
// output norm with sigmoid gate (fla FusedRMSNormGated, activation='sigmoid').
// ref: docs/model.md#kda-conv (step 4), docs/model.md#kda-output, docs/model.md#decoder. Row-parallel; each row reduced in a fixed order.
#include <cmath>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

namespace {
float sum_sq(const float* x, int64_t n) { return dot_f32(x, x, n); }
inline float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}   // namespace

void rms_norm(Exec& ex, const Tensor& x, const Tensor& w, float eps, Tensor& y) {
    const int64_t n = x.dim(0), d = x.dim(1);
    const float* xs = x.f32();
    float* ys = y.f32();
    ex.pool->parallel_for(n, [&](int64_t t) {
        const float* xr = xs + t * d;
        float* yr = ys + t * d;
        const float inv = 1.0f / std::sqrt(sum_sq(xr, d) / float(d) + eps);
        for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * element_f32(w, i);
    });
}

void l2_norm_heads(Exec& ex, Tensor& x, float eps, float scale) {
    const int64_t rows = x.dim(0) * x.dim(1), k = x.dim(2);
    float* xs = x.f32();
    ex.pool->parallel_for(rows, [&](int64_t r) {
        float* xr = xs + r * k;
        const float f = scale / std::sqrt(sum_sq(xr, k) + eps);
        for (int64_t i = 0; i < k; ++i) xr[i] *= f;
    });
}

void gated_rms_norm(Exec& ex, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& y) {
    const int64_t rows = x.dim(0) * x.dim(1), v = x.dim(2);
    const float *xs = x.f32(), *zs = z.f32();
    float* ys = y.f32();
    ex.pool->parallel_for(rows, [&](int64_t r) {
        const float* xr = xs + r * v;
        const float* zr = zs + r * v;
        float* yr = ys + r * v;
        const float inv = 1.0f / std::sqrt(sum_sq(xr, v) / float(v) + eps);
        for (int64_t i = 0; i < v; ++i) yr[i] = xr[i] * inv * element_f32(w, i) * sigmoidf(zr[i]);
    });
}

float dot_f32(const float* a, const float* b, int64_t n) {
    const int64_t n8 = n - n % 8;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n8; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
    const float b0 = acc[0] + acc[4], b1 = acc[1] + acc[5], b2 = acc[2] + acc[6], b3 = acc[3] + acc[7];
    float s = (b0 + b2) + (b1 + b3);
    for (int64_t i = n8; i < n; ++i) s += a[i] * b[i];
    return s;
}

}   // namespace kimi::cpu
