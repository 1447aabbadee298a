// DType traits and IEEE half conversion (bit-exact, no hardware F16C dependency).
#include "core/dtype.h"

#include <cmath>

namespace kimi {

size_t dtype_size(DType t) {
    switch (t) {
        case DType::kF32: return 4;
        case DType::kBF16: return 2;
        case DType::kF16: return 2;
        case DType::kI32: return 4;
        case DType::kU8: return 1;
        case DType::kMXFP4: return 1;
    }
    return 0;
}

const char* dtype_name(DType t) {
    switch (t) {
        case DType::kF32: return "F32";
        case DType::kBF16: return "BF16";
        case DType::kF16: return "F16";
        case DType::kI32: return "I32";
        case DType::kU8: return "U8";
        case DType::kMXFP4: return "MXFP4";
    }
    return "?";
}

bool dtype_from_name(std::string_view name, DType& out) {
    if (name == "F32")
        out = DType::kF32;
    else if (name == "BF16")
        out = DType::kBF16;
    else if (name == "F16")
        out = DType::kF16;
    else if (name == "I32")
        out = DType::kI32;
    else if (name == "U8")
        out = DType::kU8;
    else
        return false;
    return true;
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else {   // subnormal half → normal float
            float f = std::ldexp(float(man), -24);
            std::memcpy(&u, &f, 4);
            u |= sign;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const float a = std::fabs(f);
    if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
    if (a >= 65520.0f) return uint16_t(sign | 0x7c00u);
    if (a < 6.103515625e-05f) {   // subnormal or zero: quantize to multiples of 2^-24, ties to even
        const float q = std::nearbyint(a * 16777216.0f);
        return uint16_t(sign | uint16_t(q));
    }
    uint32_t au = u & 0x7fffffffu;
    au += 0xfffu + ((au >> 13) & 1u);   // round mantissa to 10 bits, ties to even
    const uint32_t exp = (au >> 23) - 112;
    const uint32_t man = (au >> 13) & 0x3ffu;
    if (exp >= 31) return uint16_t(sign | 0x7c00u);
    return uint16_t(sign | (exp << 10) | man);
}

}   // namespace kimi
