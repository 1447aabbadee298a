// Helpers shared by the AVX-512 translation units (include only from a TU compiled with
// -mavx512f and friends).
#pragma once
#include <immintrin.h>

#include <initializer_list>

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

// e^x on 16 lanes for finite x ≤ 0 … 88 (clamped to [-87.3, 88.7], where e^x stays a normal
// float), within 2 ulp: x = k·ln2 + r with |r| ≤ ln2/2 (ln2 split in two for an exact k·ln2),
// e^r by the Cephes degree-6 polynomial, 2^k through the exponent bits. No FMA contraction:
// each step is the separate multiply and add of the scalar form in backend/cpu/vision.cpp.
inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
    const __m512 big = _mm512_set1_ps(12582912.0f);
    const __m512 kf = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), big), big);
    const __m512 r = _mm512_add_ps(_mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(0.693359375f))),
                                   _mm512_mul_ps(kf, _mm512_set1_ps(2.12194440e-4f)));
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    for (const float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(c));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r), _mm512_set1_ps(1.0f));
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(kf), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

}   // namespace kimi::cpu
