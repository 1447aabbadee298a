// Portable matrix-product kernel: the same reduction structure as the SIMD kernels
// (8 lane partial sums, fixed lane reduction, ordered tail), written in plain C++.
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {

void widen_row_portable(const MatmulArgs& a, int64_t row, float* out) {
    const int64_t in = a.in;
    switch (a.w_dtype) {
        case DType::kF32: {
            const float* src = static_cast<const float*>(a.w) + row * in;
            for (int64_t i = 0; i < in; ++i) out[i] = src[i];
            return;
        }
        case DType::kBF16:
            for (int64_t i = 0; i < in; ++i) out[i] = bf16_to_f32(static_cast<const uint16_t*>(a.w)[row * in + i]);
            return;
        case DType::kMXFP4:
            for (int64_t i = 0; i < in; ++i)
                out[i] = mxfp4_element(static_cast<const uint8_t*>(a.w), a.w_scale, row * in + i);
            return;
        default:
            for (int64_t i = 0; i < in; ++i) out[i] = f16_to_f32(static_cast<const uint16_t*>(a.w)[row * in + i]);
    }
}

void matmul_range_scalar(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    const int64_t in8 = a.in - a.in % 8;
    for (int64_t o = o_begin; o < o_end; ++o) {
        widen_row_portable(a, o, scratch);
        for (int64_t t = 0; t < a.n_rows; ++t) {
            const float* x = a.x + t * a.ldx;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t i = 0; i < in8; i += 8)
                for (int l = 0; l < 8; ++l) acc[l] += x[i + l] * scratch[i + l];
            const float b0 = acc[0] + acc[4], b1 = acc[1] + acc[5], b2 = acc[2] + acc[6], b3 = acc[3] + acc[7];
            float s = (b0 + b2) + (b1 + b3);
            for (int64_t i = in8; i < a.in; ++i) s += x[i] * scratch[i];
            a.y[t * a.ldy + o] = s;
        }
    }
}

}   // namespace kimi::cpu
