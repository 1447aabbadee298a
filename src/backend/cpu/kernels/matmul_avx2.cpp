// AVX2 + FMA + F16C matrix-product kernel (this TU alone is compiled with those flags and is
// only called after cpu_features() confirmed them). Weights are widened to f32 into a
// per-thread scratch block of 4 rows once, then reused for every token row; the tile is
// 4 weight rows × 2 token rows (8 independent accumulators). Reduction order per element:
// see matmul_kernel.h.
#include <immintrin.h>

#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {
namespace {

inline float hsum8(__m256 v) {
    // fixed order: (l0+l4, l1+l5, l2+l6, l3+l7) then (a0+a2, a1+a3) then (b0+b1)
    const __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    const __m128 c = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(c);
}

void widen_row(const void* w, DType dt, int64_t in, int64_t row, float* out) {
    const int64_t in8 = in - in % 8;
    if (dt == DType::kF32) {
        const float* src = static_cast<const float*>(w) + row * in;
        for (int64_t i = 0; i < in; ++i) out[i] = src[i];
        return;
    }
    const uint16_t* src = static_cast<const uint16_t*>(w) + row * in;
    int64_t i = 0;
    if (dt == DType::kBF16) {
        for (; i < in8; i += 8) {
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
            const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
            _mm256_storeu_ps(out + i, _mm256_castsi256_ps(u));
        }
        for (; i < in; ++i) out[i] = bf16_to_f32(src[i]);
    } else {
        for (; i < in8; i += 8)
            _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
        for (; i < in; ++i) out[i] = f16_to_f32(src[i]);
    }
}

// NR weight rows (in wf, each `in` floats) × NT token rows.
template <int NR, int NT>
inline void tile(const float* const* xr, const float* wf, int64_t in, float* const* yr, int64_t o) {
    const int64_t in8 = in - in % 8;
    __m256 acc[NT][NR];
    for (int t = 0; t < NT; ++t)
        for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < in8; i += 8) {
        __m256 wv[NR];
        for (int r = 0; r < NR; ++r) wv[r] = _mm256_loadu_ps(wf + r * in + i);
        for (int t = 0; t < NT; ++t) {
            const __m256 xv = _mm256_loadu_ps(xr[t] + i);
            for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_fmadd_ps(xv, wv[r], acc[t][r]);
        }
    }
    for (int t = 0; t < NT; ++t) {
        for (int r = 0; r < NR; ++r) {
            float s = hsum8(acc[t][r]);
            for (int64_t i = in8; i < in; ++i) s += xr[t][i] * wf[r * in + i];
            yr[t][o + r] = s;
        }
    }
}

template <int NR>
void rows_block(const MatmulArgs& a, const float* wf, int64_t o) {
    int64_t t = 0;
    for (; t + 2 <= a.n_rows; t += 2) {
        const float* xr[2] = {a.x + t * a.ldx, a.x + (t + 1) * a.ldx};
        float* yr[2] = {a.y + t * a.ldy, a.y + (t + 1) * a.ldy};
        tile<NR, 2>(xr, wf, a.in, yr, o);
    }
    if (t < a.n_rows) {
        const float* xr[1] = {a.x + t * a.ldx};
        float* yr[1] = {a.y + t * a.ldy};
        tile<NR, 1>(xr, wf, a.in, yr, o);
    }
}

}  // namespace

void matmul_range_avx2(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    int64_t o = o_begin;
    for (; o + 4 <= o_end; o += 4) {
        for (int r = 0; r < 4; ++r) widen_row(a.w, a.w_dtype, a.in, o + r, scratch + r * a.in);
        rows_block<4>(a, scratch, o);
    }
    for (; o < o_end; ++o) {
        widen_row(a.w, a.w_dtype, a.in, o, scratch);
        rows_block<1>(a, scratch, o);
    }
}

}  // namespace kimi::cpu
