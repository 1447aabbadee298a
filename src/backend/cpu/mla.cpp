// NoPE MLA in the weight-absorbed form over a paged latent cache: one formulation for
// prefill and decode (each query reads its keys from the cache in position order), so a
// token's scores and softmax do not depend on chunking or on other sequences.
// ref: docs/model.md#mla-absorbed; vLLM MLA backends (absorbed q), llama.cpp kimi-linear MLA cache.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/mla_kernel.h"

namespace kimi::cpu {

namespace {
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
}   // namespace

void mla_cache_write(Exec& ex, const Tensor& latents, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                     std::span<const int32_t> n_past) {
    const int64_t n = latents.dim(0), w = latents.dim(1);
    const float* src = latents.f32();
    ex.pool->parallel_for(n, [&](int64_t t) {
        const int64_t b = seq_of(seq_starts, t);
        const int64_t pos = n_past[size_t(b)] + (t - seq_starts[size_t(b)]);
        const int64_t off = latent_row_offset(cache, b, pos);
        if (cache.base)
            std::copy(src + t * w, src + (t + 1) * w, cache.base + off);
        else
            for (int64_t i = 0; i < w; ++i) cache.base_bf16[off + i] = f32_to_bf16(src[t * w + i]);
    });
}

// Portable task: dot_f32's 8-lane order for the scores, scalar weighted sums, the same
// tiles and online softmax as the AVX-512 task.
void mla_task_portable(const MlaTask& t) {
    const PagedLatents& cache = *t.cache;
    const int64_t nh = t.nh, ctx = t.ctx, width = t.width, rank = t.rank;
    float s[kMlaGroup][kMlaTile];
    float m[kMlaGroup], l[kMlaGroup];
    for (int64_t h = 0; h < nh; ++h) m[h] = -INFINITY, l[h] = 0.0f;
    for (int64_t r = 0; r < nh * rank; ++r) t.o[r] = 0.0f;
    for (int64_t j0 = 0; j0 < ctx; j0 += kMlaTile) {
        const int64_t n = std::min(kMlaTile, ctx - j0);
        for (int64_t k = 0; k < n; ++k) {
            const int64_t off = latent_row_offset(cache, t.seq, j0 + k);
            for (int64_t h = 0; h < nh; ++h)
                s[h][k] = (cache.base ? dot_f32(t.q + h * width, cache.base + off, width)
                                      : dot_f32_bf16(t.q + h * width, cache.base_bf16 + off, width)) *
                    t.scale;
        }
        for (int64_t h = 0; h < nh; ++h) {
            float mt = m[h], sum = 0.0f;
            for (int64_t k = 0; k < n; ++k) mt = std::max(mt, s[h][k]);
            for (int64_t k = 0; k < n; ++k) {
                s[h][k] = std::exp(s[h][k] - mt);
                sum += s[h][k];
            }
            const float corr = std::exp(m[h] - mt);   // 0 on the first tile
            l[h] = l[h] * corr + sum;
            m[h] = mt;
            for (int64_t r = 0; r < rank; ++r) t.o[h * rank + r] *= corr;
        }
        for (int64_t k = 0; k < n; ++k) {
            const int64_t off = latent_row_offset(cache, t.seq, j0 + k);
            for (int64_t h = 0; h < nh; ++h) {
                const float p = s[h][k];
                float* oh = t.o + h * rank;
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
    for (int64_t h = 0; h < nh; ++h) {
        const float inv = 1.0f / l[h];
        for (int64_t r = 0; r < rank; ++r) t.o[h * rank + r] *= inv;
    }
}

void mla_attention(Exec& ex, const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat) {
    const int64_t n = q_abs.dim(0), n_heads = q_abs.dim(1), width = q_abs.dim(2), rank = o_lat.dim(2);
    const float* qs = q_abs.f32();
    float* os = o_lat.f32();
    const auto task_fn = use_avx512() ? mla_task_avx512 : mla_task_portable;
    // One task per (token, group of up to kMlaGroup heads): a decode step of one sequence still
    // uses several threads, and each latent row read from the cache serves the whole group
    // (the cache is read 2 · H / kMlaGroup times per token, not 2 · H).
    const int64_t n_groups = (n_heads + kMlaGroup - 1) / kMlaGroup;
    ex.pool->parallel_ranges(n * n_groups, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
            // Tokens in the order 0, n−1, 1, n−2, …: a causal prefill's cost grows with the
            // position, so each thread's contiguous range then gets early and late tokens alike.
            const int64_t k = i / n_groups, t = k % 2 == 0 ? k / 2 : n - 1 - k / 2;
            const int64_t h0 = (i % n_groups) * kMlaGroup, nh = std::min(kMlaGroup, n_heads - h0);
            const int64_t b = seq_of(seq_starts, t);
            const int64_t ctx = n_past[size_t(b)] + (t - seq_starts[size_t(b)]) + 1;
            task_fn(MlaTask{&cache, b, ctx, qs + (t * n_heads + h0) * width, nh, width, rank, scale,
                            os + (t * n_heads + h0) * rank});
        }
    });
}

}   // namespace kimi::cpu
