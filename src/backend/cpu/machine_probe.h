// Machine probes for `kimi-cpp bench machine`: streaming read bandwidth over a buffer far
// larger than the last-level cache, and the peak multiply-add rate of register-only loops
// for the best instruction set present (AVX-512 / AVX-512 BF16, AVX2+FMA, else scalar) and of
// the AMX tiles where usable. The limits the engine's decode (bandwidth) and prefill (matrix
// units) are measured against.
#pragma once
#include <cstdint>
#include <string>

namespace kimi::cpu {

// Sum of the buffer's 64-bit words (so the reads cannot be optimised away).
uint64_t read_sum(const uint64_t* p, int64_t n_words);

// A register-only loop of n_iter iterations of independent FMAs; returns the flops done
// (2 per multiply-add) and writes a result the caller must consume.
struct PeakResult {
    double flops = 0.0;
    float sink = 0.0f;
    std::string isa;
};
PeakResult fma_f32_loop(int64_t n_iter);
// bf16 multiply-adds: vdpbf16ps with AVX-512 BF16, else bf16 widened to f32 (shift) then FMA.
PeakResult fma_bf16_loop(int64_t n_iter);
// AMX-BF16 tile multiply-adds: TDPBF16PS into four independent 16 × 16 f32 accumulators
// (kernels/amx_hw.cpp; configures and releases this thread's tiles). Only when
// amx_support().usable (amx_support.h); the caller checks.
PeakResult amx_bf16_loop(int64_t n_iter);

}   // namespace kimi::cpu
