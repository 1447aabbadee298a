// CPU features, detected once at start-up; kernels are chosen from these (never -march=native).
#pragma once
#include <cstdint>
#include <string>

namespace kimi::cpu {

struct CpuFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512bf16 = false;
};

const CpuFeatures& cpu_features();

// Data cache sizes per core (bytes), from the C library's CPUID decoding (sysconf), with
// conservative defaults where it reports none; kernels size their blocks from these.
struct CacheSizes {
    int64_t l1d = 0, l2 = 0, l3 = 0;
};
const CacheSizes& cache_sizes();
std::string cpu_features_string();   // "avx2 fma f16c" — for logs and bench JSON
bool use_avx2();                     // avx2 + fma + f16c, unless KIMI_FORCE_SCALAR is set

// The instruction set the matrix-product kernels use: the best one present, capped by
// KIMI_ISA=scalar|avx2|avx512 (tests run the lesser kernels on a bigger machine) and by
// KIMI_FORCE_SCALAR. Chosen once per process. KIMI_ISA=amx (the default where the tiles run) or
// amx-emulated adds the AMX tiles on top (use_amx(), matmul_kernel.h).
enum class Isa { kScalar, kAvx2, kAvx512 };
Isa matmul_isa();
bool use_avx512();        // matmul_isa() == kAvx512 (avx512f/bw/vl + the avx2 set)
bool use_avx512_bf16();   // use_avx512() and avx512bf16 (vdpbf16ps)

}   // namespace kimi::cpu
