// Slices of a weight for tensor parallelism (vLLM's layout): a column-parallel linear keeps
// rows [r0, r1) of its [out, in] weight (output features: heads, intermediate units, vocabulary
// rows) — a view, no copy; a row-parallel linear keeps columns [c0, c1) of it (its input
// features), copied into memory the store owns, since a column slice is not contiguous. MXFP4
// weights slice at their 32-element scale groups.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "dist/comm.h"
#include "checkpoint/weight_store.h"

namespace kimi {

// This process's part of a model split over `size` ranks (tensor parallelism; with
// expert_parallel whole routed experts are split instead of each expert's intermediate).
struct Shard {
    int rank = 0, size = 1;
    bool expert_parallel = false;
    bool split() const { return size > 1; }
    // Heads, experts, vocabulary rows: as even as possible (dist::split).
    dist::Range part(int64_t n) const { return dist::split(n, size, rank); }
    // MLP intermediate units: in groups of 32 when n has a group for every rank (so MXFP4 down
    // projections split at their scale groups), else one by one.
    dist::Range units(int64_t n) const;
};

Tensor shard_rows(const Tensor& w, int64_t r0, int64_t r1);   // [r1 - r0, in]
// [out, c1 - c0]; MXFP4: c0 and c1 multiples of 32. Throws kimi::Error on a bad range.
// The full weight itself (no copy) when [c0, c1) is all of it.
Tensor shard_cols(WeightStore& store, const Tensor& w, int64_t c0, int64_t c1);

}   // namespace kimi
