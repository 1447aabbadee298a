// CPU features, detected once at start-up; kernels are chosen from these (never -march=native).
#pragma once
#include <string>

namespace kimi::cpu {

struct CpuFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512bf16 = false;
};

const CpuFeatures& cpu_features();
std::string cpu_features_string();   // "avx2 fma f16c" — for logs and bench JSON
bool use_avx2();                     // avx2 + fma + f16c, unless KIMI_FORCE_SCALAR is set

}  // namespace kimi::cpu
