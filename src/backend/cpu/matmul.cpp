// matmul: splits the output columns into blocks over the thread pool and runs the kernel
// chosen at start-up. bf16 mode rounds the activations once into an arena copy first.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {

namespace {
float* thread_scratch(int64_t n) {
    // note: grows once per thread to the largest I seen; steady-state steps never allocate.
    thread_local std::vector<float> buf;
    if (int64_t(buf.size()) < n) buf.resize(size_t(n));
    return buf.data();
}
}  // namespace

void matmul_strided(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p, float* y,
                    int64_t ldy) {
    const int64_t out = w.dim(0), in = w.dim(1);
    if (n_rows == 0 || out == 0) return;
    if (p == Precision::kBF16) {
        float* xr = static_cast<float*>(ex.arena->alloc_bytes(size_t(n_rows * in) * sizeof(float)));
        for (int64_t t = 0; t < n_rows; ++t)
            for (int64_t i = 0; i < in; ++i) xr[t * in + i] = round_to_bf16(x[t * ldx + i]);
        x = xr;
        ldx = in;
    }
    const MatmulArgs a{x, n_rows, ldx, w.data, w.dtype, in, y, ldy};
    const auto kernel = use_avx2() ? matmul_range_avx2 : matmul_range_scalar;
    // Blocks of 16 output columns; each column is computed entirely by one task.
    constexpr int64_t kBlock = 16;
    const int64_t n_blocks = (out + kBlock - 1) / kBlock;
    ex.pool->parallel_ranges(n_blocks, [&](int64_t b0, int64_t b1, int) {
        float* scratch = thread_scratch(4 * in);
        kernel(a, b0 * kBlock, std::min(out, b1 * kBlock), scratch);
    });
}

void matmul(Exec& ex, const Tensor& x, const Tensor& w, Precision p, Tensor& y) {
    matmul_strided(ex, x.f32(), x.dim(0), x.dim(1), w, p, y.f32(), y.dim(1));
}

}  // namespace kimi::cpu
