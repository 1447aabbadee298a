// Element types of tensors and their exact conversions. bf16 → f32 and f16 → f32 are exact
// widenings; f32 → bf16 rounds to nearest even (NaN kept quiet), as PyTorch's .to(bfloat16).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kimi {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);            // "F32", "BF16", "F16", "I32" (safetensors names)
bool dtype_from_name(std::string_view name, DType& out);

inline float bf16_to_f32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                         // round to nearest even
    return uint16_t(u >> 16);
}

// why: the bf16 activation path rounds activations to bf16 but keeps them in f32 registers;
// a bf16 value is an f32 whose low 16 bits are zero, so the product with a bf16 weight is exact.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace kimi
