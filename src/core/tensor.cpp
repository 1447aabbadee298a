// Tensor helpers that need no backend.
#include "core/tensor.h"

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
    }
    return 0.0f;
}

}   // namespace kimi
