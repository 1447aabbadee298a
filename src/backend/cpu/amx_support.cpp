// AMX availability (see amx_support.h).
#include "backend/cpu/amx_support.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace kimi::cpu {

namespace {

constexpr int kArchReqXcompPerm = 0x1023;   // arch_prctl: ask for an extended state component
constexpr int kXfeatureXtiledata = 18;

uint64_t xcr0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t(hi) << 32) | lo;
}

AmxSupport detect() {
    AmxSupport s;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) {
        s.why_not = "this CPU has no AMX-BF16 tiles";
        return s;
    }
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || (xcr0() & (3u << 17)) != (3u << 17)) {
        s.why_not = "the OS does not save the AMX tile state (XCR0)";
        return s;
    }
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
        s.why_not = "Linux refused this process the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return s;
    }
    s.usable = true;
    return s;
}

}   // namespace

const AmxSupport& amx_support() {
    static const AmxSupport s = detect();
    return s;
}

}   // namespace kimi::cpu
