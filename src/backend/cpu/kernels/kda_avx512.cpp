// The KDA recurrence of one (sequence, head), compiled with AVX-512 flags (see kda_kernel.h).
#include "backend/cpu/kda_kernel.h"

namespace kimi::cpu {

void kda_head_avx512(const KdaHeadArgs& a, float* uv) { kda_head_portable_body(a, uv); }

}   // namespace kimi::cpu
