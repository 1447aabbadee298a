// AVX-512 MLA attention task (see mla_kernel.h; this TU alone is compiled with AVX-512 flags and
// only called when matmul_isa() is avx512). Per (token, head), over position tiles of
// kMlaTile: each score a 16-lane dot product (lane l sums i ≡ l mod 16 in order, lanes
// reduced in a fixed order, the tail in order) times the scale; the online softmax (running
// maximum, sums rescaled when it grows); the output rescaled then accumulated by FMA in
// position order, 32 latent columns at a time for the whole head group; divided by the sum at
// the end. f32 or bf16 latents (widened exactly in registers).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels/avx512_util.h"
#include "backend/cpu/mla_kernel.h"
#include "core/dtype.h"

namespace kimi::cpu {
namespace {

template <bool BF16>
inline __m512 row16(const void* row, int64_t i) {
    if constexpr (BF16) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
        return _mm512_loadu_ps(static_cast<const float*>(row) + i);
    }
}

template <bool BF16>
inline float row1(const void* row, int64_t i) {
    if constexpr (BF16)
        return bf16_to_f32(static_cast<const uint16_t*>(row)[i]);
    else
        return static_cast<const float*>(row)[i];
}

// Calls fn(j, row) for every position j in [jb, je) in order, walking the block table.
template <bool BF16, class Fn>
inline void for_each_row(const MlaTask& t, int64_t jb, int64_t je, Fn&& fn) {
    const ops::PagedLatents& c = *t.cache;
    for (int64_t j = jb; j < je;) {
        const int64_t off = latent_row_offset(c, t.seq, j),
                      n = std::min<int64_t>(c.block_size - j % c.block_size, je - j);
        for (int64_t k = 0; k < n; ++k, ++j) {
            const int64_t at = off + k * c.row_width;
            if constexpr (BF16)
                fn(j, static_cast<const void*>(c.base_bf16 + at));
            else
                fn(j, static_cast<const void*>(c.base + at));
        }
    }
}

template <bool BF16, int NH>
void run(const MlaTask& t) {
    const int64_t ctx = t.ctx, width = t.width, rank = t.rank, w16 = width - width % 16, r32 = rank - rank % 32;
    float s[NH][kMlaTile];   // the tile's scores, then its exponentials
    float m[NH], l[NH], corr[NH];
    for (int h = 0; h < NH; ++h) m[h] = -INFINITY, l[h] = 0.0f;
    for (int64_t r = 0; r < NH * rank; ++r) t.o[r] = 0.0f;
    for (int64_t j0 = 0; j0 < ctx; j0 += kMlaTile) {
        const int64_t j1 = std::min(ctx, j0 + kMlaTile), n = j1 - j0;
        // Scores: each latent row against the NH queries.
        for_each_row<BF16>(t, j0, j1, [&](int64_t j, const void* row) {
            __m512 acc[NH];
            for (int h = 0; h < NH; ++h) acc[h] = _mm512_setzero_ps();
            for (int64_t i = 0; i < w16; i += 16) {
                const __m512 c = row16<BF16>(row, i);
                for (int h = 0; h < NH; ++h) acc[h] = _mm512_fmadd_ps(_mm512_loadu_ps(t.q + h * width + i), c, acc[h]);
            }
            for (int h = 0; h < NH; ++h) {
                float v = hsum16(acc[h]);
                for (int64_t i = w16; i < width; ++i) v += t.q[h * width + i] * row1<BF16>(row, i);
                s[h][j - j0] = v * t.scale;
            }
        });
        // Online softmax: the new running maximum, the old sums rescaled to it.
        for (int h = 0; h < NH; ++h) {
            float mt = m[h], sum = 0.0f;
            for (int64_t k = 0; k < n; ++k) mt = std::max(mt, s[h][k]);
            for (int64_t k = 0; k < n; ++k) {
                s[h][k] = std::exp(s[h][k] - mt);
                sum += s[h][k];
            }
            corr[h] = std::exp(m[h] - mt);   // 0 on the first tile
            l[h] = l[h] * corr[h] + sum;
            m[h] = mt;
        }
        // Weighted sums: 32 latent columns × NH heads in registers over the tile's rows.
        for (int64_t r0 = 0; r0 < r32; r0 += 32) {
            __m512 acc[NH][2];
            for (int h = 0; h < NH; ++h) {
                const __m512 f = _mm512_set1_ps(corr[h]);
                acc[h][0] = _mm512_mul_ps(_mm512_loadu_ps(t.o + h * rank + r0), f);
                acc[h][1] = _mm512_mul_ps(_mm512_loadu_ps(t.o + h * rank + r0 + 16), f);
            }
            for_each_row<BF16>(t, j0, j1, [&](int64_t j, const void* row) {
                const __m512 c0 = row16<BF16>(row, r0), c1 = row16<BF16>(row, r0 + 16);
                for (int h = 0; h < NH; ++h) {
                    const __m512 p = _mm512_set1_ps(s[h][j - j0]);
                    acc[h][0] = _mm512_fmadd_ps(p, c0, acc[h][0]);
                    acc[h][1] = _mm512_fmadd_ps(p, c1, acc[h][1]);
                }
            });
            for (int h = 0; h < NH; ++h) {
                _mm512_storeu_ps(t.o + h * rank + r0, acc[h][0]);
                _mm512_storeu_ps(t.o + h * rank + r0 + 16, acc[h][1]);
            }
        }
        if (r32 < rank) {   // the last columns one at a time, same order
            for (int h = 0; h < NH; ++h)
                for (int64_t r = r32; r < rank; ++r) t.o[h * rank + r] *= corr[h];
            for_each_row<BF16>(t, j0, j1, [&](int64_t j, const void* row) {
                for (int h = 0; h < NH; ++h)
                    for (int64_t r = r32; r < rank; ++r)
                        t.o[h * rank + r] = std::fma(s[h][j - j0], row1<BF16>(row, r), t.o[h * rank + r]);
            });
        }
    }
    for (int h = 0; h < NH; ++h) {
        const float inv = 1.0f / l[h];
        for (int64_t r = 0; r < rank; ++r) t.o[h * rank + r] *= inv;
    }
}

template <bool BF16>
void run_heads(const MlaTask& t) {
    switch (t.nh) {
        case 1: return run<BF16, 1>(t);
        case 2: return run<BF16, 2>(t);
        case 3: return run<BF16, 3>(t);
        case 4: return run<BF16, 4>(t);
        case 5: return run<BF16, 5>(t);
        case 6: return run<BF16, 6>(t);
        case 7: return run<BF16, 7>(t);
        default: return run<BF16, 8>(t);
    }
}

}   // namespace

void mla_task_avx512(const MlaTask& t) {
    static_assert(kMlaGroup == 8, "run_heads dispatches up to 8 heads");
    if (t.cache->base_bf16)
        run_heads<true>(t);
    else
        run_heads<false>(t);
}

}   // namespace kimi::cpu
