// Pieces of ggml's k-quant blocks shared by the AVX-512 GGUF kernels (quant_avx512.cpp,
// quant_lanes_avx512.cpp); include only from a TU compiled with -mavx512f -mf16c and friends.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace kimi::cpu {

// The f16 at p as f32, for the products: vcvtph2ps, the same value as core's f16_bits_to_f32 (a
// signalling NaN comes out quiet; the exact decoders keep the bits with f16_bits_to_f32).
static inline float f16_value(const uint8_t* p) { return _cvtsh_ss(uint16_t(p[0] | (p[1] << 8))); }

// The 8 scales and 8 mins of a Q4_K/Q5_K block at once (get_scale_min_k4 on byte lanes), times d
// and −dmin: out[j] = d · sc_j, out[8 + j] = −(dmin · mn_j), the products k_scale_min forms.
// q: the 12 scale bytes (16 are read; the 4 after them are the block's own).
static inline __m512 k_scales16(const uint8_t* q, float d, float dmin) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    // lanes 0-7: scale j, 8-15: min j. main byte: q[j] / q[j + 4] (scale, j < 4 / j ≥ 4), q[j + 4]
    // (min); top-bits byte (j ≥ 4): q[j − 4] (scale), q[j] (min)
    const __m128i a = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i b = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i lo6 = _mm_and_si128(a, _mm_set1_epi8(63)), lo4 = _mm_and_si128(a, _mm_set1_epi8(15)),
                  hi4 = _mm_and_si128(_mm_srli_epi16(a, 4), _mm_set1_epi8(15));
    __m128i main = _mm_mask_blend_epi8(0x00F0, lo6, lo4);   // scales j ≥ 4: low nibble
    main = _mm_mask_blend_epi8(0xF000, main, hi4);          // mins j ≥ 4: high nibble
    const __m128i top = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(b, 6), _mm_set1_epi8(3)), 4);
    const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_or_si128(main, top)));
    const __m512 mul = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d), _mm512_set1_ps(-dmin));
    return _mm512_mul_ps(mul, f);
}

}   // namespace kimi::cpu
