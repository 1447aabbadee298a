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

// The unit of work the callers split a product's output columns into: a multiple of the
// kernels' 8-, 4- and 3-row blocks, small enough to balance 2-16 threads on narrow products.
constexpr int64_t kMatmulColumnBlock = 24;

// The most weight rows a kernel widens at once.
constexpr int64_t kMaxRowBlock = 48;

// Floats of per-thread scratch a kernel needs for products with I = in (32-byte aligned).
constexpr int64_t matmul_scratch_floats(int64_t in) { return 16 * kMaxRowBlock * 8 + kMaxRowBlock * in; }

// scratch: matmul_scratch_floats(I) floats, 32-byte aligned, private to the calling thread.
void matmul_range_scalar(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
void matmul_range_avx2(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);

}  // namespace kimi::cpu
