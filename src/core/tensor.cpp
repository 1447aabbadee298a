// Tensor helpers that need no backend.
#include "core/tensor.h"

#include "core/quant_blocks.h"

namespace kimi {

std::string shape_str(const Tensor& t) {
    std::string s = "[";
    for (int i = 0; i < t.rank; ++i) {
        if (i) s += ", ";
        s += std::to_string(t.shape[i]);
    }
    return s + "]";
}

float element_f32(const Tensor& t, int64_t i) {
    switch (t.dtype) {
        case DType::kF32: return static_cast<const float*>(t.data)[i];
        case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
        case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
        case DType::kI32: return float(static_cast<const int32_t*>(t.data)[i]);
        case DType::kU8: return float(static_cast<const uint8_t*>(t.data)[i]);
        case DType::kMXFP4: return mxfp4_element(static_cast<const uint8_t*>(t.data), t.scale, i);
        default: return block_element(t.dtype, t.data, t.rank ? t.dim(-1) : 1, i);
    }
}

void decode_f32(const Tensor& t, float* out) {
    if (is_block_quant(t.dtype)) return dequantize_blocks(t.dtype, t.data, out, t.numel());
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = element_f32(t, i);
}

void decode_row_f32(const Tensor& t, int64_t row, float* out) {
    const int64_t d = t.dim(-1);
    if (is_block_quant(t.dtype)) {
        const BlockShape b = dtype_block(t.dtype);
        return dequantize_blocks(t.dtype, static_cast<const char*>(t.data) + row * (d / b.elems * b.bytes), out, d);
    }
    for (int64_t i = 0; i < d; ++i) out[i] = element_f32(t, row * d + i);
}

}   // namespace kimi
