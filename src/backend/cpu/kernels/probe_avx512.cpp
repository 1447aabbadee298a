// AVX-512 probe loops (compiled with -mavx512f/bw/vl/bf16; called only when use_avx512(),
// the bf16 one only when use_avx512_bf16()).
#include <immintrin.h>

#include <cstdint>

namespace kimi::cpu::avx512 {

namespace {
float reduce(const __m512* acc, int n) {
    __m512 s = acc[0];
    for (int k = 1; k < n; ++k) s = _mm512_add_ps(s, acc[k]);
    alignas(64) float out[16];
    _mm512_store_ps(out, s);
    return out[0] + out[15];
}
}   // namespace

// 12 independent accumulators cover the FMA latency × 2 ports.
float fma_f32(int64_t n_iter) {
    __m512 acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(float(k) * 1e-3f);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < n_iter; ++i)
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
    return reduce(acc, 12);
}

// vdpbf16ps: 32 bf16 multiply-adds per instruction.
float dot_bf16(int64_t n_iter) {
    __m512 acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(float(k) * 1e-3f);
    const __m512i x = _mm512_set1_epi32(0x33d633d6);   // two bf16 1e-7 per lane
    const __m512i w = _mm512_set1_epi32(0x3f803f80);   // two bf16 1.0 per lane
    for (int64_t i = 0; i < n_iter; ++i)
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], (__m512bh)x, (__m512bh)w);
    return reduce(acc, 12);
}

}   // namespace kimi::cpu::avx512
