// Element types of tensors and their exact conversions. bf16 → f32 and f16 → f32 are exact
// widenings; f32 → bf16 rounds to nearest even (NaN kept quiet), as PyTorch's .to(bfloat16).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kimi {

// kU8: raw bytes (safetensors "U8": packed MXFP4 values and their E8M0 scales on disk).
// kMXFP4: a matrix of FP4 E2M1 values, two per byte (even column in the low nibble), with one
// E8M0 scale byte per 32 consecutive values of a row (Tensor::scale); compressed-tensors
// "mxfp4-pack-quantized". Its element size is half a byte: see Tensor::nbytes.
//
// The block types after kMXFP4 are GGUF's (ggml's) quantized weight formats, stored as ggml lays
// them out: each row is a sequence of blocks of `dtype_block(t).elems` values in
// `dtype_block(t).bytes` bytes, f16 scales and integer or codebook parts in the block. They are
// decoded exactly, as ggml's own dequantization does (core/quant_blocks.h). kMXFP4_GGML is
// ggml's MXFP4 block (one E8M0 byte, then 16 bytes: value j in the low nibble of byte j, value
// j + 16 in its high nibble), not the checkpoint's kMXFP4 layout.
enum class DType : uint8_t {
    kF32,
    kBF16,
    kF16,
    kI32,
    kU8,
    kMXFP4,
    kQ4_0,
    kQ4_1,
    kQ5_0,
    kQ5_1,
    kQ8_0,
    kQ2_K,
    kQ3_K,
    kQ4_K,
    kQ5_K,
    kQ6_K,
    kIQ4_NL,
    kIQ4_XS,
    kMXFP4_GGML,
    kIQ2_XXS,
    kIQ2_XS,
    kIQ2_S,
    kIQ3_XXS,
    kIQ3_S,
    kIQ1_S,
    kIQ1_M,
    kTQ1_0,
    kTQ2_0,
};

// A block type's geometry: `elems` values stored in `bytes` bytes (1 and the element size for
// the plain types; kMXFP4: 2 values in 1 byte, its scales held apart).
struct BlockShape {
    int64_t elems;
    int64_t bytes;
};
BlockShape dtype_block(DType t);
bool is_block_quant(DType t);      // a GGUF block type (kQ4_0 … kTQ2_0)
size_t dtype_size(DType t);        // bytes per element (kMXFP4: 1, for its scale bytes; see Tensor::nbytes);
                                   // a block type has none: throws kimi::Error
const char* dtype_name(DType t);   // "F32", "BF16", "F16", "I32", "U8" (safetensors names), "MXFP4", and
                                   // ggml's names for the block types ("Q4_K", "IQ2_XXS", "MXFP4_GGML", ...)
bool dtype_from_name(std::string_view name, DType& out);

// note: these helpers are `static` (one copy per translation unit): they are also compiled
// into the AVX-512 kernel TUs, and a shared inline copy could let the linker hand a portable
// caller the AVX-512 build of them.
static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);   // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
    return uint16_t(u >> 16);
}

// why: the bf16 activation path rounds activations to bf16 but keeps them in f32 registers;
// a bf16 value is an f32 whose low 16 bits are zero, so the product with a bf16 weight is exact.
static inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// MXFP4 (OCP microscaling): E2M1 magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6} (bit 3 = sign) and
// the E8M0 scale 2^(byte − 127), as f32 (byte 255 is NaN in the format; read as 2^128 = inf).
constexpr int64_t kMxfp4Group = 32;
static inline float e2m1_to_f32(uint8_t nibble) {
    constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float m = kMag[nibble & 7];
    return (nibble & 8) ? -m : m;
}
static inline float e8m0_to_f32(uint8_t e) {
    if (e == 0) return 0x1p-127f;   // the subnormal 2^-127 (e << 23 would read as 0)
    const uint32_t u = uint32_t(e) << 23;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
// Element e (row-major, flat) of an MXFP4 matrix: packed bytes and scale bytes.
static inline float mxfp4_element(const uint8_t* packed, const uint8_t* scale, int64_t e) {
    const uint8_t b = packed[e >> 1];
    return e2m1_to_f32((e & 1) ? uint8_t(b >> 4) : uint8_t(b & 15)) * e8m0_to_f32(scale[e / kMxfp4Group]);
}

// IEEE half → f32, exactly (subnormals as man · 2^-24, an exact product; NaN payloads kept).
// `static inline` for the AVX-512 kernels' inner loops (an out-of-line call there spills every
// vector register); f16_to_f32 is the same function out of line.
static inline float f16_bits_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        const float f = float(man) * 0x1p-24f;
        std::memcpy(&u, &f, 4);
        u |= sign;
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}   // namespace kimi
