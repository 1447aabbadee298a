// AVX2 + FMA probe loops (compiled with -mavx2 -mfma; called only when use_avx2()).
#include <immintrin.h>

#include <cstdint>

namespace kimi::cpu::avx2 {

uint64_t read_sum(const uint64_t* p, int64_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
    }
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
    uint64_t r = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; ++i) r += p[i];
    return r;
}

// 10 independent accumulators hide the FMA latency (4 cycles × 2 ports on Zen/Intel).
float fma_f32(int64_t n_iter) {
    __m256 acc[10];
    for (int k = 0; k < 10; ++k) acc[k] = _mm256_set1_ps(float(k) * 1e-3f);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < n_iter; ++i)
        for (int k = 0; k < 10; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
    __m256 s = acc[0];
    for (int k = 1; k < 10; ++k) s = _mm256_add_ps(s, acc[k]);
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    return out[0] + out[7];
}

// Per iteration: 8 bf16 pairs widened (two shifts/ands) and 2 × 5 FMAs of 8 lanes.
float fma_bf16(int64_t n_iter) {
    __m256 acc[10];
    for (int k = 0; k < 10; ++k) acc[k] = _mm256_set1_ps(float(k) * 1e-3f);
    __m256i w = _mm256_set1_epi32(0x3f803f80);   // two bf16 1.0 per lane
    const __m256 x = _mm256_set1_ps(1e-7f);
    const __m256i hi_mask = _mm256_set1_epi32(int(0xffff0000u));
    for (int64_t i = 0; i < n_iter; ++i) {
        const __m256 lo = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
        const __m256 hi = _mm256_castsi256_ps(_mm256_and_si256(w, hi_mask));
        for (int k = 0; k < 5; ++k) acc[k] = _mm256_fmadd_ps(lo, x, acc[k]);
        for (int k = 5; k < 10; ++k) acc[k] = _mm256_fmadd_ps(hi, x, acc[k]);
        w = _mm256_xor_si256(w, _mm256_set1_epi32(1));   // keep the widening inside the loop
    }
    __m256 s = acc[0];
    for (int k = 1; k < 10; ++k) s = _mm256_add_ps(s, acc[k]);
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    return out[0] + out[7];
}

}   // namespace kimi::cpu::avx2
