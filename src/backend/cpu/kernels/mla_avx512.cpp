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

// The first min(n, 16) lanes.
inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// The scores of NP latent rows against the NH queries into s[h · kMlaTile + p]: per score a
// 16-lane dot product (lane l sums i ≡ l mod 16 in order), hsum16, the tail in order, × scale.
template <bool BF16, int NH, int NP>
inline void scores(const MlaTask& t, const void* const* rows, int64_t w16, float* s) {
    __m512 acc[NH][NP];
    for (int h = 0; h < NH; ++h)
        for (int p = 0; p < NP; ++p) acc[h][p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < w16; i += 16) {
        __m512 c[NP];
        for (int p = 0; p < NP; ++p) c[p] = row16<BF16>(rows[p], i);
        for (int h = 0; h < NH; ++h) {
            const __m512 q = _mm512_loadu_ps(t.q + h * t.width + i);
            for (int p = 0; p < NP; ++p) acc[h][p] = _mm512_fmadd_ps(q, c[p], acc[h][p]);
        }
    }
    for (int h = 0; h < NH; ++h)
        for (int p = 0; p < NP; ++p) {
            float v = hsum16(acc[h][p]);
            for (int64_t i = w16; i < t.width; ++i) v += t.q[h * t.width + i] * row1<BF16>(rows[p], i);
            s[h * kMlaTile + p] = v * t.scale;
        }
}

// Output columns r0 … r0 + 16·NC of the NH heads: rescaled by corr, then + s·row for the n rows
// of the tile in position order (one FMA per element and row).
template <bool BF16, int NH, int NC>
inline void weighted(const MlaTask& t, const void* const* rows, int64_t n, int64_t r0, const float* s,
                     const float* corr) {
    __m512 acc[NH][NC];
    for (int h = 0; h < NH; ++h) {
        const __m512 f = _mm512_set1_ps(corr[h]);
        for (int c = 0; c < NC; ++c) acc[h][c] = _mm512_mul_ps(_mm512_loadu_ps(t.o + h * t.rank + r0 + 16 * c), f);
    }
    for (int64_t j = 0; j < n; ++j) {
        __m512 cv[NC];
        for (int c = 0; c < NC; ++c) cv[c] = row16<BF16>(rows[j], r0 + 16 * c);
        for (int h = 0; h < NH; ++h) {
            const __m512 p = _mm512_set1_ps(s[h * kMlaTile + j]);
            for (int c = 0; c < NC; ++c) acc[h][c] = _mm512_fmadd_ps(p, cv[c], acc[h][c]);
        }
    }
    for (int h = 0; h < NH; ++h)
        for (int c = 0; c < NC; ++c) _mm512_storeu_ps(t.o + h * t.rank + r0 + 16 * c, acc[h][c]);
}

template <bool BF16, int NH>
void run(const MlaTask& t) {
    const int64_t ctx = t.ctx, width = t.width, rank = t.rank, w16 = width - width % 16, r16 = rank - rank % 16;
    float s[NH][kMlaTile];   // the tile's scores, then its exponentials
    float m[NH], l[NH], corr[NH];
    for (int h = 0; h < NH; ++h) m[h] = -INFINITY, l[h] = 0.0f;
    for (int64_t r = 0; r < NH * rank; ++r) t.o[r] = 0.0f;
    for (int64_t j0 = 0; j0 < ctx; j0 += kMlaTile) {
        const int64_t j1 = std::min(ctx, j0 + kMlaTile), n = j1 - j0;
        // Scores: 3 latent rows at a time against the NH queries (3·NH accumulators; each query
        // vector loaded once per 3 rows: a load per FMA before, and loads were the limit).
        const void* rows[kMlaTile];
        for_each_row<BF16>(t, j0, j1, [&](int64_t j, const void* row) { rows[j - j0] = row; });
        int64_t k = 0;
        for (; k + 3 <= n; k += 3) scores<BF16, NH, 3>(t, rows + k, w16, &s[0][k]);
        for (; k < n; ++k) scores<BF16, NH, 1>(t, rows + k, w16, &s[0][k]);
        // Online softmax: the new running maximum, the old sums rescaled to it.
        // The exponentials 16 at a time (a libm call each was 6 % of a 64k-context prefill),
        // summed in 16 lanes then in hsum16's order.
        for (int h = 0; h < NH; ++h) {
            __m512 mv = _mm512_set1_ps(m[h]);
            for (int64_t k = 0; k < n; k += 16)
                mv = _mm512_mask_max_ps(mv, lanes(n - k), mv, _mm512_loadu_ps(s[h] + k));
            const float mt = _mm512_reduce_max_ps(mv);   // max: exact in any order
            __m512 sv = _mm512_setzero_ps();
            for (int64_t k = 0; k < n; k += 16) {
                const __mmask16 live = lanes(n - k);
                const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s[h] + k), _mm512_set1_ps(mt)));
                _mm512_mask_storeu_ps(s[h] + k, live, e);
                sv = _mm512_mask_add_ps(sv, live, sv, e);
            }
            const float sum = hsum16(sv);
            corr[h] = std::exp(m[h] - mt);   // 0 on the first tile
            l[h] = l[h] * corr[h] + sum;
            m[h] = mt;
        }
        // Weighted sums: 48 latent columns × NH heads in registers over the tile's rows (then
        // 32, then 16), each output element summed in position order. (Every step stays inside
        // the rank: a 32-column step over a 16-column rest wrote into the next head's output.)
        int64_t r0 = 0;
        for (; r0 + 48 <= r16; r0 += 48) weighted<BF16, NH, 3>(t, rows, n, r0, &s[0][0], corr);
        for (; r0 + 32 <= r16; r0 += 32) weighted<BF16, NH, 2>(t, rows, n, r0, &s[0][0], corr);
        if (r0 < r16) weighted<BF16, NH, 1>(t, rows, n, r0, &s[0][0], corr);
        if (r16 < rank) {   // the last columns one at a time, same order
            for (int h = 0; h < NH; ++h)
                for (int64_t r = r16; r < rank; ++r) t.o[h * rank + r] *= corr[h];
            for (int64_t j = 0; j < n; ++j)
                for (int h = 0; h < NH; ++h)
                    for (int64_t r = r16; r < rank; ++r)
                        t.o[h * rank + r] = std::fma(s[h][j], row1<BF16>(rows[j], r), t.o[h * rank + r]);
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
