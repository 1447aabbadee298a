// MXFP4 rounding rule (see mxfp4_quantize.h).
// ref: compressed-tensors quantization/utils/mxfp_utils.py (round_to_power_2, generate_mx_scales),
// quantization/utils/fp4_utils.py (cast_to_fp4), compressors pack_fp4_to_uint8 (index + sign bit).
#include "checkpoint/mxfp4_quantize.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace kimi {

uint8_t mxfp4_scale_byte(float amax) {
    uint32_t u;
    std::memcpy(&u, &amax, 4);
    u = ((u & 0x7fffffffu) + (1u << 21)) & 0x7f800000u;   // round_to_power_2 (sign dropped: amax ≥ 0)
    const int exp_field = int(u >> 23);                   // p = 2^(exp_field − 127); 0: p = 0 (or below 2^-126)
    if (exp_field == 0) return 0;
    if (exp_field == 255) return 254;   // p overflowed to inf
    const int s = exp_field - 2;        // 127 + log2(p) − 2
    return uint8_t(s < 0 ? 0 : s > 254 ? 254 : s);
}

uint8_t e2m1_nibble(float v) {
    const float a = std::fabs(round_to_bf16(v));
    uint8_t m = 0;
    if (a > 0.25f) m = 1;
    if (a >= 0.75f) m = 2;
    if (a > 1.25f) m = 3;
    if (a >= 1.75f) m = 4;
    if (a > 2.5f) m = 5;
    if (a >= 3.5f) m = 6;
    if (a > 5.0f) m = 7;
    if (std::isnan(v)) m = 7;   // not a number: the format has none; saturate
    return uint8_t(m | (std::signbit(v) ? 8 : 0));
}

void mxfp4_quantize_group(const float* w, uint8_t* packed, uint8_t* scale) {
    float amax = 0.0f;
    for (int i = 0; i < int(kMxfp4Group); ++i) amax = std::fmax(amax, std::fabs(w[i]));
    const uint8_t s = mxfp4_scale_byte(amax);
    *scale = s;
    const float inv = 1.0f / e8m0_to_f32(s);   // exact: a power of two within f32 range
    for (int i = 0; i < int(kMxfp4Group); i += 2)
        packed[i / 2] = uint8_t(e2m1_nibble(w[i] * inv) | (e2m1_nibble(w[i + 1] * inv) << 4));
}

}   // namespace kimi
