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
inline int64_t row_offset(const PagedLatents& c, int64_t seq, int64_t pos) {
    const int32_t block = c.block_tables[size_t(seq * c.max_blocks + pos / c.block_size)];
    return (int64_t(block) * c.block_size + pos % c.block_size) * c.row_width;
}
// dot_f32 with a bf16 second operand, in the same 8-lane order (the widening is exact, so the
// result equals dot_f32 over the widened row, without writing that row anywhere).
inline float dot_f32_bf16(const float* a, const uint16_t* b, int64_t n) {
    const int64_t n8 = n - n % 8;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n8; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * bf16_to_f32(b[i + l]);
    const float b0 = acc[0] + acc[4], b1 = acc[1] + acc[5], b2 = acc[2] + acc[6], b3 = acc[3] + acc[7];
    float s = (b0 + b2) + (b1 + b3);
    for (int64_t i = n8; i < n; ++i) s += a[i] * bf16_to_f32(b[i]);
    return s;
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
        const int64_t off = row_offset(cache, b, pos);
        if (cache.base)
            std::copy(src + t * w, src + (t + 1) * w, cache.base + off);
        else
            for (int64_t i = 0; i < w; ++i) cache.base_bf16[off + i] = f32_to_bf16(src[t * w + i]);
    });
}

void mla_attention(Exec& ex, const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat) {
    const int64_t n = q_abs.dim(0), n_heads = q_abs.dim(1), width = q_abs.dim(2), rank = o_lat.dim(2);
    const float* qs = q_abs.f32();
    float* os = o_lat.f32();
    // One task per (token, group of up to kGroup heads): a decode step of one sequence still
    // uses several threads, and each latent row read from the cache serves the whole group
    // (the cache is read 2 · H / kGroup times per token, not 2 · H). Per (token, head) the
    // arithmetic is the same whatever the grouping or the thread: scores in position order,
    // one softmax, the weighted sum in position order.
    constexpr int64_t kGroup = 8;
    const int64_t n_groups = (n_heads + kGroup - 1) / kGroup;
    ex.pool->parallel_ranges(n * n_groups, [&](int64_t i0, int64_t i1, int) {
        // note: per-thread score buffer, grown once to the longest context seen.
        thread_local std::vector<float> scores;
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t t = i / n_groups, h0 = (i % n_groups) * kGroup, nh = std::min(kGroup, n_heads - h0);
            const int64_t b = seq_of(seq_starts, t);
            const int64_t ctx = n_past[size_t(b)] + (t - seq_starts[size_t(b)]) + 1;
            if (int64_t(scores.size()) < nh * ctx) scores.resize(std::max({size_t(nh * ctx), 2 * scores.size(), size_t(8 * 4096)}));
            const float* q = qs + (t * n_heads + h0) * width;   // [nh, width]
            float* o = os + (t * n_heads + h0) * rank;          // [nh, rank]
            float m[kGroup], inv[kGroup];
            for (int64_t h = 0; h < nh; ++h) m[h] = -INFINITY;
            for (int64_t j = 0; j < ctx; ++j) {
                const int64_t off = row_offset(cache, b, j);
                for (int64_t h = 0; h < nh; ++h) {
                    float& sc = scores[size_t(h * ctx + j)];
                    sc = (cache.base ? dot_f32(q + h * width, cache.base + off, width)
                                     : dot_f32_bf16(q + h * width, cache.base_bf16 + off, width)) * scale;
                    m[h] = std::max(m[h], sc);
                }
            }
            for (int64_t h = 0; h < nh; ++h) {
                float* sh = scores.data() + h * ctx;
                float sum = 0.0f;
                for (int64_t j = 0; j < ctx; ++j) {
                    sh[j] = std::exp(sh[j] - m[h]);
                    sum += sh[j];
                }
                inv[h] = 1.0f / sum;
            }
            for (int64_t r = 0; r < nh * rank; ++r) o[r] = 0.0f;
            for (int64_t j = 0; j < ctx; ++j) {
                const int64_t off = row_offset(cache, b, j);
                for (int64_t h = 0; h < nh; ++h) {
                    const float p = scores[size_t(h * ctx + j)] * inv[h];
                    float* oh = o + h * rank;
                    if (cache.base) {
                        const float* c = cache.base + off;
                        for (int64_t r = 0; r < rank; ++r) oh[r] += p * c[r];
                    } else {
                        const uint16_t* c = cache.base_bf16 + off;
                        for (int64_t r = 0; r < rank; ++r) oh[r] += p * bf16_to_f32(c[r]);
                    }
                }
            }
        }
    });
}

}  // namespace kimi::cpu
