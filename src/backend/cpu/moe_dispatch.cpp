// MoE dispatch and combine (op_table.h): the counting sort of the (token, slot) pairs by expert
// with the gather of their activations, and each token's weighted sum of its experts' outputs.
// ref: docs/model.md#moe.
#include <cstring>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

void moe_dispatch(Exec& ex, const Tensor& x, const Tensor& ids, std::span<const uint8_t> local, Tensor& starts,
                  Tensor& row_of, Tensor& xg) {
    const int64_t pairs = ids.numel(), k = ids.dim(1), in = x.dim(1), n_exp = int64_t(local.size());
    const int32_t* id = ids.i32();
    int32_t* start = starts.i32();   // [E + 1]
    int32_t* row = row_of.i32();     // [T · A]
    std::memset(start, 0, size_t(n_exp + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < pairs; ++i)
        if (local[size_t(id[i])]) ++start[id[i] + 1];
    for (int64_t e = 0; e < n_exp; ++e) start[e + 1] += start[e];
    // the next free row of each expert
    auto* fill = static_cast<int32_t*>(ex.arena->alloc_bytes(size_t(n_exp) * sizeof(int32_t)));
    std::memcpy(fill, start, size_t(n_exp) * sizeof(int32_t));
    for (int64_t i = 0; i < pairs; ++i) {
        if (!local[size_t(id[i])]) {
            row[i] = -1;
            continue;
        }
        const int32_t r = fill[id[i]]++;
        row[i] = r;
        std::memcpy(xg.f32() + int64_t(r) * in, x.f32() + (i / k) * in, size_t(in) * sizeof(float));
    }
}

void moe_combine(Exec& ex, const Tensor& yg, const Tensor& row_of, const Tensor& weights, Tensor& y) {
    const int64_t n = y.dim(0), in = y.dim(1), k = row_of.dim(1);
    ex.pool->parallel_for(n, [&](int64_t t) {
        float* yr = y.f32() + t * in;
        for (int64_t j = 0; j < in; ++j) yr[j] = 0.0f;
        for (int64_t s = 0; s < k; ++s) {
            const int32_t r = row_of.i32()[t * k + s];
            if (r < 0) continue;
            const float wt = weights.f32()[t * k + s];
            const float* er = yg.f32() + int64_t(r) * in;
            for (int64_t j = 0; j < in; ++j) yr[j] += wt * er[j];
        }
    });
}

}   // namespace kimi::cpu
