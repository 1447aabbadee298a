// MXFP4 quantization as compressed-tensors / llm-compressor do it (the rule `kimi-cpp quantize`
// applies; docs/mxfp4.md#format for the layout). Per group of 32 consecutive weights of a row:
//  1. amax = max |w|; rounded to a power of two p the way compressed-tensors' round_to_power_2
//     does: add a quarter of the leading bit to the bit pattern and keep sign + exponent, so
//     amax = m·2^k goes to 2^k for m < 1.75 and to 2^(k+1) for m ≥ 1.75;
//  2. scale byte s = 127 + log2(p) − 2 (generate_mx_scales: 2 = floor(log2(6))), clamped to
//     [0, 254]; an all-zero group (p = 0) gets s = 0;
//  3. each w / 2^(s−127) (exact: a power of two), rounded to bf16 as cast_to_fp4 does, then to
//     the nearest E2M1 value with ties to even — |v| ≤ 0.25 → 0, < 0.75 → 0.5, ≤ 1.25 → 1,
//     < 1.75 → 1.5, ≤ 2.5 → 2, < 3.5 → 3, ≤ 5 → 4, else 6 (saturating) — and the sign bit of
//     v (a negative value that rounds to 0 keeps it: −0).
// Nibbles are packed two per byte, the even column in the low nibble.
#pragma once
#include <cstdint>

namespace kimi {

// The E8M0 scale byte of a group whose largest magnitude is amax.
uint8_t mxfp4_scale_byte(float amax);
// The E2M1 nibble of v (already divided by the group's scale).
uint8_t e2m1_nibble(float v);
// Quantizes one group of 32 values: 16 packed bytes and the scale byte.
void mxfp4_quantize_group(const float* w, uint8_t* packed, uint8_t* scale);

}   // namespace kimi
