// AVX-512 BF16 matrix-product kernel for bf16 activations × bf16 weights (this TU alone is
// compiled with -mavx512f/bw/vl/bf16 and is only called after cpu_features() confirmed them).
// vdpbf16ps multiplies the stored weight bits with the activations rounded to bf16, with no
// widening at all. Per output element: 16 lanes, each adding its pair of products (odd
// element, then even) per 32 elements for i < I − I % 32; the lanes reduced in a fixed order
// (upper half onto lower, then as the AVX2 kernel); the tail in order. Two paths with that
// one order, so a row's result depends on nothing but that row:
// - few token rows: weights streamed from memory 8 or 4 rows at a time, prefetched ahead;
// - many token rows: blocks of weight rows (the next block prefetched into L2 meanwhile)
//   against 4-token × 4-row micro-tiles over the whole reduction, accumulators in registers.
// f32 activations (and f16/f32 weights) stay on the AVX2 kernel: on the machine we measured
// (Xeon, AVX-512 BF16) a 512-bit f32 path was no faster than it (docs/performance.md).
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {
namespace {

constexpr int64_t kPrefetchRows = 16;   // how far ahead (in weight rows) the direct path prefetches
constexpr int64_t kDirectMaxRows = 4;   // token rows up to which the direct path is used
constexpr int64_t kTokBlock = 16;   // token rows per pass over a block of weight rows

inline float hsum16(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s = _mm256_add_ps(lo, hi);
    const __m128 a = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}

// bf16 activations × bf16 weights: vdpbf16ps on the stored bits.
struct DotBf16Mode {
    using X = uint16_t;
    static constexpr int64_t kStep = 32;
    static constexpr size_t kWBytes = 2;
    static __m512i x_at(const uint16_t* x, int64_t i) { return _mm512_loadu_si512(x + i); }
    static __m512i w_at(const void* w, int64_t i) { return _mm512_loadu_si512(static_cast<const uint16_t*>(w) + i); }
    static __m512 madd(__m512 acc, __m512i x, __m512i w) {
        return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);   // same-size vector reinterpretation
    }
    static float x1(const uint16_t* x, int64_t i) { return bf16_to_f32(x[i]); }
    static float w1(const void* w, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(w)[i]); }
};

// The operands of one product in a mode: token rows x (ldx apart), weight rows w (`in` apart).
template <class M>
struct Operands {
    const typename M::X* x;
    int64_t ldx;
    const void* w;   // row 0 of the rows addressed below
};

// The end of a tile: the lanes reduced in the fixed order, the tail added in order, stored.
template <class M, int NR, int NT>
inline void finish(const MatmulArgs& a, const Operands<M>& op, const __m512 (&acc)[NT][NR], const typename M::X* const (&xr)[NT],
                   int64_t w0, int64_t t, int64_t o) {
    const int64_t in = a.in, in_v = in - in % M::kStep;
    for (int j = 0; j < NT; ++j) {
        for (int r = 0; r < NR; ++r) {
            float s = hsum16(acc[j][r]);
            for (int64_t i = in_v; i < in; ++i) s += M::x1(xr[j], i) * M::w1(op.w, w0 + r * in + i);
            a.y[(t + j) * a.ldy + o + r] = s;
        }
    }
}

// Direct path: NR weight rows from o × NT token rows from t, weights read from memory.
template <class M, int NR, int NT>
inline void direct_tile(const MatmulArgs& a, const Operands<M>& op, int64_t t, int64_t o, int64_t o_end) {
    const int64_t in = a.in, in_v = in - in % M::kStep;
    const int64_t n_pf = std::clamp<int64_t>(o_end - o - kPrefetchRows, 0, NR);   // stay inside the range
    const typename M::X* xr[NT];
    for (int j = 0; j < NT; ++j) xr[j] = op.x + (t + j) * op.ldx;
    const int64_t w0 = o * in;
    __m512 acc[NT][NR];
    for (int j = 0; j < NT; ++j)
        for (int r = 0; r < NR; ++r) acc[j][r] = _mm512_setzero_ps();
    const char* ahead = static_cast<const char*>(op.w) + size_t(w0 + kPrefetchRows * in) * M::kWBytes;
    for (int64_t i = 0; i < in_v; i += M::kStep) {
        decltype(M::x_at(xr[0], 0)) xv[NT];
        for (int j = 0; j < NT; ++j) xv[j] = M::x_at(xr[j], i);
        for (int r = 0; r < NR; ++r) {
            const auto wv = M::w_at(op.w, w0 + r * in + i);
            for (int j = 0; j < NT; ++j) acc[j][r] = M::madd(acc[j][r], xv[j], wv);
        }
        if (n_pf > 0 && (size_t(i) * M::kWBytes) % 64 == 0)
            for (int r = 0; r < n_pf; ++r) _mm_prefetch(ahead + size_t(r * in + i) * M::kWBytes, _MM_HINT_T0);
    }
    finish<M, NR, NT>(a, op, acc, xr, w0, t, o);
}

template <class M, int NR>
inline void direct_rows(const MatmulArgs& a, const Operands<M>& op, int64_t o, int64_t o_end) {
    int64_t t = 0;
    for (; t + 2 <= a.n_rows; t += 2) direct_tile<M, NR, 2>(a, op, t, o, o_end);
    if (t < a.n_rows) direct_tile<M, NR, 1>(a, op, t, o, o_end);
}

template <class M>
void direct_range(const MatmulArgs& a, const Operands<M>& op, int64_t o_begin, int64_t o_end) {
    int64_t o = o_begin;
    if (a.n_rows == 1)
        for (; o + 8 <= o_end; o += 8) direct_tile<M, 8, 1>(a, op, 0, o, o_end);
    for (; o + 4 <= o_end; o += 4) direct_rows<M, 4>(a, op, o, o_end);
    for (; o < o_end; ++o) direct_rows<M, 1>(a, op, o, o_end);
}

// Blocked path: NR weight rows × NT token rows over the whole reduction (weights from L1/L2).
// Output column o; its weights are row `wrow` of op.w.
template <class M, int NR, int NT>
inline void tile(const MatmulArgs& a, const Operands<M>& op, int64_t t, int64_t o, int64_t wrow) {
    const int64_t in = a.in, in_v = in - in % M::kStep, w0 = wrow * in;
    const typename M::X* xr[NT];
    __m512 acc[NT][NR];
    for (int j = 0; j < NT; ++j) {
        xr[j] = op.x + (t + j) * op.ldx;
        for (int r = 0; r < NR; ++r) acc[j][r] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < in_v; i += M::kStep) {
        decltype(M::w_at(op.w, 0)) wv[NR];
        for (int r = 0; r < NR; ++r) wv[r] = M::w_at(op.w, w0 + r * in + i);
        for (int j = 0; j < NT; ++j) {
            auto xv = M::x_at(xr[j], i);
            __asm__("" : "+v"(xv));   // keep xv in a register: folded into each product it would be loaded NR times
            for (int r = 0; r < NR; ++r) acc[j][r] = M::madd(acc[j][r], xv, wv[r]);
        }
    }
    finish<M, NR, NT>(a, op, acc, xr, w0, t, o);
}

template <class M, int NR>
inline void rows_tiles(const MatmulArgs& a, const Operands<M>& op, int64_t t0, int64_t t1, int64_t o, int64_t wrow) {
    int64_t t = t0;
    for (; t + 4 <= t1; t += 4) tile<M, NR, 4>(a, op, t, o, wrow);
    switch (t1 - t) {
        case 3: return tile<M, NR, 3>(a, op, t, o, wrow);
        case 2: return tile<M, NR, 2>(a, op, t, o, wrow);
        case 1: return tile<M, NR, 1>(a, op, t, o, wrow);
        default: return;
    }
}

// Weight rows per block: as many as keep the block (bf16) within about 192 KiB (L2).
int64_t row_block(int64_t in) { return std::clamp<int64_t>((98304 / std::max<int64_t>(in, 1)) / 4 * 4, 4, kMaxRowBlock); }

template <class M>
void blocked_range(const MatmulArgs& a, const Operands<M>& op, int64_t o_begin, int64_t o_end) {
    const int64_t rb = row_block(a.in);
    for (int64_t o = o_begin; o < o_end; o += rb) {
        const int64_t n_w = std::min(rb, o_end - o), next_rows = std::min(rb, o_end - o - n_w);
        const char* next = static_cast<const char*>(op.w) + size_t((o + n_w) * a.in) * M::kWBytes;
        const size_t next_bytes = size_t(next_rows * a.in) * M::kWBytes;
        size_t pf = 0;   // the next block's bytes prefetched so far, spread over this block's tiles
        for (int64_t t = 0; t < a.n_rows; t += kTokBlock) {
            const int64_t t1 = std::min(a.n_rows, t + kTokBlock);
            int64_t r = 0;
            for (; r + 4 <= n_w; r += 4) {
                for (const size_t end = std::min(next_bytes, pf + size_t(4 * a.in) * M::kWBytes); pf < end; pf += 64)
                    _mm_prefetch(next + pf, _MM_HINT_T1);
                rows_tiles<M, 4>(a, op, t, t1, o + r, o + r);
            }
            for (; r < n_w; ++r) rows_tiles<M, 1>(a, op, t, t1, o + r, o + r);
        }
    }
}

}  // namespace

void matmul_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (!a.xb || a.w_dtype != DType::kBF16) return matmul_range_avx2(a, o_begin, o_end, scratch);
    const Operands<DotBf16Mode> op{a.xb, a.in, a.w};
    if (a.n_rows > kDirectMaxRows) return blocked_range(a, op, o_begin, o_end);
    direct_range(a, op, o_begin, o_end);
}

}  // namespace kimi::cpu
