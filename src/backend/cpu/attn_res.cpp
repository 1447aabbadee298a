// Block Attention Residuals mix (Kimi-K3): a per-token softmax over the banked block
// snapshots and the current partial sum, scored on their RMS-normalised values, mixing the
// raw values. ref: docs/model.md#attnres, docs/model.md#attnres-details; HF modeling_kimi_linear.py _apply_attn_res.
// Token-parallel; each token's scores and sum run in one fixed order.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace kimi::cpu {

namespace {
// Entries per mix: at most one block per layer (the config caps layers at 1024) + the partial sum.
constexpr size_t kMaxEntries = 1025;
}   // namespace

void attn_res_mix(Exec& ex, std::span<const Tensor* const> blocks, const Tensor& partial, const Tensor& score_w,
                  float eps, Tensor& y) {
    const int64_t n = partial.dim(0), d = partial.dim(1);
    const size_t n_entries = blocks.size() + 1;
    KIMI_CHECK(n_entries <= kMaxEntries, "attn_res_mix: too many blocks");
    const float* w = score_w.f32();
    ex.pool->parallel_for(n, [&](int64_t t) {
        const float* rows[kMaxEntries];
        float score[kMaxEntries];
        for (size_t i = 0; i < blocks.size(); ++i) rows[i] = blocks[i]->f32() + t * d;
        rows[blocks.size()] = partial.f32() + t * d;
        float top = -INFINITY;
        for (size_t i = 0; i < n_entries; ++i) {
            const float inv = 1.0f / std::sqrt(dot_f32(rows[i], rows[i], d) / float(d) + eps);
            score[i] = inv * dot_f32(rows[i], w, d);
            top = std::max(top, score[i]);
        }
        float total = 0.0f;
        for (size_t i = 0; i < n_entries; ++i) {
            score[i] = std::exp(score[i] - top);
            total += score[i];
        }
        for (size_t i = 0; i < n_entries; ++i) score[i] /= total;
        float* yr = y.f32() + t * d;
        for (int64_t j = 0; j < d; ++j) {
            float acc = 0.0f;
            for (size_t i = 0; i < n_entries; ++i) acc += score[i] * rows[i][j];
            yr[j] = acc;
        }
    });
}

}   // namespace kimi::cpu
