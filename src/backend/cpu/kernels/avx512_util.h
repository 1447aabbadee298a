// Helpers shared by the AVX-512 translation units (include only from a TU compiled with
// -mavx512f and friends).
#pragma once
#include <immintrin.h>

namespace kimi::cpu {

// The 16 lanes summed in one fixed order: upper half onto lower, then pairwise.
inline float hsum16(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s = _mm256_add_ps(lo, hi);
    const __m128 a = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}

}   // namespace kimi::cpu
