// The matrix-product micro-kernel interface shared by the scalar and ISA-specific versions.
// A kernel computes y[t, o] = Σ_i x[t, i] · w[o, i] for rows t < n_rows and o in [o_begin, o_end).
// Per output element the reduction order is fixed: 8 lane partial sums over i ≡ lane (mod 8)
// for i < I - I % 8, a fixed pairwise lane reduction, then the tail i in order — so the
// result does not depend on n_rows, the o range or the blocking used.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace kimi::cpu {

struct MatmulArgs {
    const float* x;   // n_rows rows, ldx apart
    int64_t n_rows, ldx;
    const void* w;    // [O, I] of w_dtype
    DType w_dtype;
    int64_t in;       // I
    float* y;         // n_rows rows, ldy apart
    int64_t ldy;
};

// scratch: at least 4 * I floats, private to the calling thread.
void matmul_range_scalar(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
void matmul_range_avx2(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);

}  // namespace kimi::cpu
