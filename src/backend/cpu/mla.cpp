// NoPE MLA in the weight-absorbed form over a paged latent cache: one formulation for
// prefill and decode (each query reads its keys from the cache in position order), so a
// token's scores and softmax do not depend on chunking or on other sequences.
// ref: model-spec §4.1; vLLM MLA backends (absorbed q), llama.cpp kimi-linear MLA cache.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

namespace {
inline const float* latent_row(const PagedLatents& c, int64_t seq, int64_t pos) {
    const int32_t block = c.block_tables[size_t(seq * c.max_blocks + pos / c.block_size)];
    return c.base + (int64_t(block) * c.block_size + pos % c.block_size) * c.row_width;
}
inline int64_t seq_of(std::span<const int32_t> seq_starts, int64_t t) {
    return int64_t(std::upper_bound(seq_starts.begin(), seq_starts.end(), int32_t(t)) - seq_starts.begin()) - 1;
}
}  // namespace

void mla_cache_write(Exec& ex, const Tensor& latents, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                     std::span<const int32_t> n_past) {
    const int64_t n = latents.dim(0), w = latents.dim(1);
    const float* src = latents.f32();
    ex.pool->parallel_for(n, [&](int64_t t) {
        const int64_t b = seq_of(seq_starts, t);
        const int64_t pos = n_past[size_t(b)] + (t - seq_starts[size_t(b)]);
        float* dst = const_cast<float*>(latent_row(cache, b, pos));
        std::copy(src + t * w, src + (t + 1) * w, dst);
    });
}

void mla_attention(Exec& ex, const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat) {
    const int64_t n = q_abs.dim(0), n_heads = q_abs.dim(1), width = q_abs.dim(2), rank = o_lat.dim(2);
    const float* qs = q_abs.f32();
    float* os = o_lat.f32();
    // One task per (token, head): a decode step of one sequence still uses every thread, and
    // each output row is computed by one task with the same arithmetic (thread-invariant).
    ex.pool->parallel_ranges(n * n_heads, [&](int64_t i0, int64_t i1, int) {
        // note: per-thread score buffer, grown once to the longest context seen.
        thread_local std::vector<float> scores;
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t t = i / n_heads, h = i % n_heads;
            const int64_t b = seq_of(seq_starts, t);
            const int64_t ctx = n_past[size_t(b)] + (t - seq_starts[size_t(b)]) + 1;
            if (int64_t(scores.size()) < ctx) scores.resize(std::max({size_t(ctx), 2 * scores.size(), size_t(4096)}));
            const float* q = qs + (t * n_heads + h) * width;
            float* o = os + (t * n_heads + h) * rank;
            float m = -INFINITY;
            for (int64_t j = 0; j < ctx; ++j) {
                scores[size_t(j)] = dot_f32(q, latent_row(cache, b, j), width) * scale;
                m = std::max(m, scores[size_t(j)]);
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < ctx; ++j) {
                scores[size_t(j)] = std::exp(scores[size_t(j)] - m);
                sum += scores[size_t(j)];
            }
            const float inv = 1.0f / sum;
            for (int64_t r = 0; r < rank; ++r) o[r] = 0.0f;
            for (int64_t j = 0; j < ctx; ++j) {
                const float p = scores[size_t(j)] * inv;
                const float* c = latent_row(cache, b, j);
                for (int64_t r = 0; r < rank; ++r) o[r] += p * c[r];
            }
        }
    });
}

}  // namespace kimi::cpu
