// The loops the factored block products share (quant_avx512.cpp per 32-value chunk,
// quant_lanes_avx512.cpp in the sub-block lane order): the prefetch of the rows ahead while a
// decode tile streams its own, and the prefill driver over panels of prepared rows. Include
// only from a TU compiled with -mavx512f and friends.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {

// Streaming NR rows from row o: how many of the rows kBlockPrefetchAhead further on (before o_end)
// to prefetch, and the prefetch of their block k (B::kBytes bytes a block, row_bytes a row).
constexpr int64_t kBlockPrefetchAhead = 16;
inline int64_t rows_to_prefetch(int64_t o, int64_t o_end, int64_t nr) {
    return std::clamp<int64_t>(o_end - o - kBlockPrefetchAhead, 0, nr);
}
template <class B>
inline void prefetch_rows_ahead(const uint8_t* w, int64_t row_bytes, int64_t k, int64_t n_pf) {
    for (int64_t r = 0; r < n_pf; ++r)
        for (int64_t l = 0; l < B::kBytes; l += 64)
            _mm_prefetch(reinterpret_cast<const char*>(w + (kBlockPrefetchAhead + r) * row_bytes + k * B::kBytes + l),
                         _MM_HINT_T0);
}

constexpr int64_t kPanelPrefetchRows = 4;

// Prefill: rows [o_begin, o_end) in panels of kMatmulColumnBlock, each block of a panel prepared
// once into pre ([rows][blocks]); the token rows then go through the panel in groups (a multiple
// of `step`) whose activations fit a quarter of L2, so each group is read from L2 by all the
// panel's row tiles: tiles4(t0, t1, o, rows) for 4 rows at a time, tiles1 for the rest.
template <class B, class Tiles4, class Tiles1>
void prepared_panels(const MatmulArgs& a, int64_t o_begin, int64_t o_end, B* pre, int64_t step, Tiles4 tiles4,
                     Tiles1 tiles1) {
    static_assert(sizeof(B) <= 4 * B::kElems, "a panel of prepared rows must fit in the scratch (4 bytes per value)");
    const int64_t nblk = a.in / B::kElems, row_bytes = nblk * B::kBytes;
    const int64_t group = std::max<int64_t>(step, int64_t(cache_sizes().l2) / 4 / (2 * a.in) / step * step);
    for (int64_t p0 = o_begin; p0 < o_end; p0 += kMatmulColumnBlock) {
        const int64_t p1 = std::min(o_end, p0 + kMatmulColumnBlock);
        const auto* w = static_cast<const uint8_t*>(a.w) + p0 * row_bytes;
        for (int64_t r = 0; r < p1 - p0; ++r) {
            if (p0 + r + kPanelPrefetchRows < o_end)   // the row kPanelPrefetchRows on, as this one is prepared
                for (int64_t l = 0; l < row_bytes; l += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(w + (r + kPanelPrefetchRows) * row_bytes + l),
                                 _MM_HINT_T0);
            for (int64_t k = 0; k < nblk; ++k) pre[r * nblk + k].prepare(w + r * row_bytes + k * B::kBytes);
        }
        for (int64_t t0 = 0; t0 < a.n_rows; t0 += group) {
            const int64_t t1 = std::min(a.n_rows, t0 + group);
            int64_t o = p0;
            for (; o + 4 <= p1; o += 4) tiles4(t0, t1, o, pre + (o - p0) * nblk);
            for (; o < p1; ++o) tiles1(t0, t1, o, pre + (o - p0) * nblk);
        }
    }
}

}   // namespace kimi::cpu
