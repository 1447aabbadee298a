// Whether this process may run AMX tile instructions: the CPU has AMX-TILE and AMX-BF16
// (cpuid leaf 7), the OS saves the tile state (XCR0 bits 17 and 18), and Linux granted this
// process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once). Otherwise why not, in
// one line. KIMI_ISA below amx never turns the tiles on.
#pragma once
#include <cstdint>
#include <string>

namespace kimi::cpu {

struct AmxSupport {
    bool usable = false;
    std::string why_not;   // empty when usable
};
const AmxSupport& amx_support();

// One TDPBF16PS on real tiles (kernels/amx_hw.cpp): c [m, n] f32 (n ≤ 16) += a [m, 2k] bf16
// (k ≤ 16 pairs) · b [k, 2n] bf16 pairs, m ≤ 16, all rows packed. Only when amx_support().usable.
void tdpbf16ps_hw(float* c, int m, int n, const uint16_t* a, const uint16_t* b, int k);

}   // namespace kimi::cpu
