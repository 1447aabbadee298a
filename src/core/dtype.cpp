// DType traits and IEEE half conversion (bit-exact, no hardware F16C dependency).
#include "core/dtype.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace kimi {

namespace {
struct TypeInfo {
    const char* name;
    BlockShape block;
};
// In DType order. Block geometry as ggml defines it (QK_K = 256 for the k-quants and the codebooks).
constexpr TypeInfo kTypes[] = {
    {"F32", {1, 4}},       {"BF16", {1, 2}},       {"F16", {1, 2}},          {"I32", {1, 4}},
    {"U8", {1, 1}},        {"MXFP4", {2, 1}},      {"Q4_0", {32, 18}},       {"Q4_1", {32, 20}},
    {"Q5_0", {32, 22}},    {"Q5_1", {32, 24}},     {"Q8_0", {32, 34}},       {"Q2_K", {256, 84}},
    {"Q3_K", {256, 110}},  {"Q4_K", {256, 144}},   {"Q5_K", {256, 176}},     {"Q6_K", {256, 210}},
    {"IQ4_NL", {32, 18}},  {"IQ4_XS", {256, 136}}, {"MXFP4_GGML", {32, 17}}, {"IQ2_XXS", {256, 66}},
    {"IQ2_XS", {256, 74}}, {"IQ2_S", {256, 82}},   {"IQ3_XXS", {256, 98}},   {"IQ3_S", {256, 110}},
    {"IQ1_S", {256, 50}},  {"IQ1_M", {256, 56}},   {"TQ1_0", {256, 54}},     {"TQ2_0", {256, 66}},
};
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);
static_assert(kNumTypes == size_t(DType::kTQ2_0) + 1, "kTypes must list every DType in order");
}   // namespace

BlockShape dtype_block(DType t) { return size_t(t) < kNumTypes ? kTypes[size_t(t)].block : BlockShape{1, 1}; }

bool is_block_quant(DType t) { return t >= DType::kQ4_0 && t <= DType::kTQ2_0; }

size_t dtype_size(DType t) {
    if (is_block_quant(t))
        throw Error(std::string("dtype_size: ") + dtype_name(t) + " is a block type (no size per element)");
    return t == DType::kMXFP4 ? 1 : size_t(dtype_block(t).bytes);
}

const char* dtype_name(DType t) { return size_t(t) < kNumTypes ? kTypes[size_t(t)].name : "?"; }

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
    else {
        // ggml's block type names, as dtype_name spells them ("Q4_K", "IQ2_XXS", "MXFP4_GGML", ...);
        // not "MXFP4", which is no safetensors dtype.
        for (size_t i = size_t(DType::kQ4_0); i < kNumTypes; ++i) {
            if (name == kTypes[i].name) {
                out = DType(i);
                return true;
            }
        }
        return false;
    }
    return true;
}

float f16_to_f32(uint16_t h) { return f16_bits_to_f32(h); }

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
