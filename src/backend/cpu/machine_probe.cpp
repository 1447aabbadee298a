// Machine probes: dispatch to the AVX-512, AVX2 or scalar loops (see machine_probe.h).
#include "backend/cpu/machine_probe.h"

#include <cstring>

#include "backend/cpu/cpu_features.h"

namespace kimi::cpu {

namespace avx2 {
uint64_t read_sum(const uint64_t* p, int64_t n);
float fma_f32(int64_t n_iter);
float fma_bf16(int64_t n_iter);
}   // namespace avx2
namespace avx512 {
float fma_f32(int64_t n_iter);
float dot_bf16(int64_t n_iter);
}   // namespace avx512

namespace {
PeakResult peak(float sink, double flops, const char* isa) {
    PeakResult r;
    r.sink = sink;
    r.flops = flops;
    r.isa = isa;
    return r;
}
}   // namespace

uint64_t read_sum(const uint64_t* p, int64_t n) {
    if (use_avx2()) return avx2::read_sum(p, n);
    uint64_t a[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; ++k) a[k] += p[i + k];
    for (; i < n; ++i) a[0] += p[i];
    return a[0] + a[1] + a[2] + a[3];
}

PeakResult fma_f32_loop(int64_t n_iter) {
    const double n = double(n_iter);
    if (use_avx512()) return peak(avx512::fma_f32(n_iter), n * 12 * 16 * 2, "avx512f");
    if (use_avx2()) return peak(avx2::fma_f32(n_iter), n * 10 * 8 * 2, "avx2-fma");
    float acc[8] = {0, 1e-3f, 2e-3f, 3e-3f, 4e-3f, 5e-3f, 6e-3f, 7e-3f};
    for (int64_t i = 0; i < n_iter; ++i)
        for (float& a : acc) a = a * 0.999999f + 1e-7f;
    float sink = 0.0f;
    for (float a : acc) sink += a;
    return peak(sink, n * 8 * 2, "scalar");
}

PeakResult fma_bf16_loop(int64_t n_iter) {
    const double n = double(n_iter);
    if (use_avx512_bf16()) return peak(avx512::dot_bf16(n_iter), n * 12 * 32 * 2, "avx512-bf16 (vdpbf16ps)");
    if (use_avx2()) return peak(avx2::fma_bf16(n_iter), n * 10 * 8 * 2, "avx2-fma (bf16 widened to f32)");
    uint32_t w = 0x3f803f80u;
    float acc[8] = {};
    for (int64_t i = 0; i < n_iter; ++i) {
        const uint32_t lo_bits = w << 16, hi_bits = w & 0xffff0000u;
        float lo, hi;
        std::memcpy(&lo, &lo_bits, 4);
        std::memcpy(&hi, &hi_bits, 4);
        for (int k = 0; k < 4; ++k) acc[k] += lo * 1e-7f;
        for (int k = 4; k < 8; ++k) acc[k] += hi * 1e-7f;
        w ^= 1u;
    }
    float sink = 0.0f;
    for (float a : acc) sink += a;
    return peak(sink, n * 8 * 2, "scalar (bf16 widened to f32)");
}

}   // namespace kimi::cpu
