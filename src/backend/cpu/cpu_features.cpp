// CPU feature detection via the compiler's cpuid builtins.
#include "backend/cpu/cpu_features.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace kimi::cpu {

const CpuFeatures& cpu_features() {
    static const CpuFeatures f = [] {
        CpuFeatures c;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        c.avx2 = __builtin_cpu_supports("avx2");
        c.fma = __builtin_cpu_supports("fma");
        c.f16c = __builtin_cpu_supports("f16c");
        c.avx512f = __builtin_cpu_supports("avx512f");
        c.avx512bw = __builtin_cpu_supports("avx512bw");
        c.avx512vl = __builtin_cpu_supports("avx512vl");
#if defined(__GNUC__) && __GNUC__ >= 12
        c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
#endif
        return c;
    }();
    return f;
}

const CacheSizes& cache_sizes() {
    static const CacheSizes c = [] {
        auto get = [](int name, int64_t fallback) {
            const long v = ::sysconf(name);
            return v > 0 ? int64_t(v) : fallback;
        };
        CacheSizes s;
        s.l1d = get(_SC_LEVEL1_DCACHE_SIZE, int64_t(32) << 10);
        s.l2 = get(_SC_LEVEL2_CACHE_SIZE, int64_t(1) << 20);
        s.l3 = get(_SC_LEVEL3_CACHE_SIZE, int64_t(8) << 20);
        return s;
    }();
    return c;
}

std::string cpu_features_string() {
    const CpuFeatures& c = cpu_features();
    std::string s;
    auto add = [&](bool on, const char* name) {
        if (!on) return;
        if (!s.empty()) s += ' ';
        s += name;
    };
    add(c.avx2, "avx2");
    add(c.fma, "fma");
    add(c.f16c, "f16c");
    add(c.avx512f, "avx512f");
    add(c.avx512bw, "avx512bw");
    add(c.avx512vl, "avx512vl");
    add(c.avx512bf16, "avx512bf16");
    return s.empty() ? "baseline" : s;
}

bool use_avx2() {
    static const bool on = [] {
        const CpuFeatures& c = cpu_features();
        const char* force = std::getenv("KIMI_FORCE_SCALAR");
        return c.avx2 && c.fma && c.f16c && !(force && *force && *force != '0');
    }();
    return on;
}

Isa matmul_isa() {
    static const Isa isa = [] {
        const CpuFeatures& c = cpu_features();
        Isa best = !use_avx2() ? Isa::kScalar : (c.avx512f && c.avx512bw && c.avx512vl) ? Isa::kAvx512 : Isa::kAvx2;
        const char* cap = std::getenv("KIMI_ISA");
        if (cap && *cap) {
            Isa want = Isa::kAvx512;
            if (std::strcmp(cap, "scalar") == 0)
                want = Isa::kScalar;
            else if (std::strcmp(cap, "avx2") == 0)
                want = Isa::kAvx2;
            else if (std::strcmp(cap, "avx512") != 0 && std::strcmp(cap, "amx") != 0 &&
                     std::strcmp(cap, "amx-emulated") != 0)
                std::fprintf(stderr, "kimi: ignoring KIMI_ISA=%s (expected amx, avx512, avx2 or scalar)\n", cap);
            best = std::min(best, want);
        }
        return best;
    }();
    return isa;
}

bool use_avx512() { return matmul_isa() == Isa::kAvx512; }

bool use_avx512_bf16() { return use_avx512() && cpu_features().avx512bf16; }

}   // namespace kimi::cpu
