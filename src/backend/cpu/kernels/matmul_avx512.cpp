// AVX-512 matrix-product kernels (this TU alone is compiled with -mavx512f/bw/vl/bf16 and is
// only called after cpu_features() confirmed them). Three operand modes:
// - bf16 activations × bf16 weights: vdpbf16ps on the stored weight bits and the activations
//   rounded to bf16, no widening at all. Per output element: 16 lanes, each adding its pair of
//   products (odd element, then even) per 32 elements for i < I − I % 32;
// - bf16 activations × MXFP4 weights: per group of 32, vdpbf16ps of the unscaled E2M1 values
//   from zero, then one FMA with the group's scale into the 16 lane sums;
// - f32 activations (any weight dtype; also bf16 activations with f16/f32 weights): 512-bit
//   FMA on weights widened exactly to f32, 16 lanes, lane l summing i ≡ l (mod 16) in index
//   order for i < I − I % 16.
// Either way the lanes are then reduced in a fixed order (upper half onto lower, then as the
// AVX2 kernel) and the tail added in order. Two paths with that one order, so a row's result
// depends on nothing but that row:
// - few token rows: weights streamed from memory 8 or 4 rows at a time, prefetched ahead;
// - many token rows: blocks of weight rows (bf16: as stored, the next block prefetched into
//   L2 meanwhile; otherwise decoded once into a per-thread scratch) against 6-token × 4-row
//   micro-tiles over the whole reduction, accumulators in registers.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/avx512_util.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {
namespace {

constexpr int64_t kPrefetchRows = 16;   // how far ahead (in weight rows) the direct path prefetches
constexpr int64_t kDirectMaxRows = 4;   // token rows up to which the direct path is used
// Token rows per pass over a block of weight rows: one micro-tile, so its rows stay in L1
// while the block's weight rows stream from L2 (24 rows here cost 10-20 %: the tile's token
// rows then came from L2 for every 4 weight rows; docs/performance.md).
constexpr int64_t kTokBlock = 6;

// Where a product's weight rows are: the data (row 0 of the rows addressed) and, for MXFP4,
// the E8M0 scales; element e of the matrix is addressed flat (row · I + column).
struct WRef {
    const void* data;
    const uint8_t* scale = nullptr;
};

// 16 MXFP4 values from element e (a multiple of 16, so within one group of 32), as f32:
// 8 bytes of nibbles (element e + k in bits 4k..4k+3), each looked up among the 16 signed
// E2M1 values, times the group's scale — exact, as mxfp4_element.
inline __m512 mxfp4_16(const WRef& w, int64_t e) {
    uint64_t bits;
    std::memcpy(&bits, static_cast<const uint8_t*>(w.data) + e / 2, 8);
    const __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(int32_t(uint32_t(bits)))),
                                             _mm256_set1_epi32(int32_t(uint32_t(bits >> 32))), 1);
    const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i nib = _mm512_srlv_epi32(words, shifts);   // permutexvar reads the low 4 bits only
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f,
                                      -4.0f, -6.0f);
    return _mm512_mul_ps(_mm512_permutexvar_ps(nib, lut), _mm512_set1_ps(e8m0_to_f32(w.scale[e / kMxfp4Group])));
}

inline float weight1(DType dt, const WRef& w, int64_t e) {
    switch (dt) {
        case DType::kF32: return static_cast<const float*>(w.data)[e];
        case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[e]);
        case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(w.data)[e]);
        default: return mxfp4_element(static_cast<const uint8_t*>(w.data), w.scale, e);
    }
}

// bf16 activations × bf16 weights: vdpbf16ps on the stored bits.
struct DotBf16Mode {
    using X = uint16_t;
    static constexpr DType kW = DType::kBF16;
    static constexpr int64_t kStep = 32;
    static __m512i x_at(const uint16_t* x, int64_t i) { return _mm512_loadu_si512(x + i); }
    static __m512i w_at(const WRef& w, int64_t e) { return _mm512_loadu_si512(static_cast<const uint16_t*>(w.data) + e); }
    static __m512 madd(__m512 acc, __m512i x, __m512i w) {
        return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);   // same-size vector reinterpretation
    }
    static float x1(const uint16_t* x, int64_t i) { return bf16_to_f32(x[i]); }
    static float w1(const WRef& w, int64_t e) { return bf16_to_f32(static_cast<const uint16_t*>(w.data)[e]); }
};

// bf16 activations × MXFP4 weights. One step is one group of 32: the E2M1 values (unscaled,
// exact in bf16) go through vdpbf16ps from zero, and that group sum is multiplied by the
// group's scale and added in one FMA — so each lane adds scale · (pair of products) per group.
// kScratch: the values already decoded to bf16 (a block in the per-thread scratch, scales after
// them); else decoded from the packed nibbles in registers: each byte's two nibbles become the
// low and high word of a 32-bit lane (element order), then vpermw looks them up.
struct Mxfp4Group {
    __m512i q;   // 32 bf16 values
    __m512 s;    // the group's scale, broadcast
};
inline __m512i e2m1_bf16_32(const uint8_t* packed16) {
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed16)));
    const __m512i idx = _mm512_or_si512(_mm512_and_si512(d, _mm512_set1_epi32(0x0f)),
                                        _mm512_slli_epi32(_mm512_and_si512(d, _mm512_set1_epi32(0xf0)), 12));
    const __m512i lut = _mm512_setr_epi32(0x3f000000, 0x3fc03f80, 0x40404000, 0x40c04080, int32_t(0xbf008000), int32_t(0xbfc0bf80),
                                          int32_t(0xc040c000), int32_t(0xc0c0c080), 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_epi16(idx, lut);
}
template <bool kScratch>
struct Mxfp4Bf16Mode {
    using X = uint16_t;
    static constexpr DType kW = kScratch ? DType::kBF16 : DType::kMXFP4;   // how the values are stored
    static constexpr int64_t kStep = 32;
    static __m512i x_at(const uint16_t* x, int64_t i) { return _mm512_loadu_si512(x + i); }
    static Mxfp4Group w_at(const WRef& w, int64_t e) {
        const __m512i q = kScratch ? _mm512_loadu_si512(static_cast<const uint16_t*>(w.data) + e)
                                   : e2m1_bf16_32(static_cast<const uint8_t*>(w.data) + e / 2);
        return {q, _mm512_set1_ps(e8m0_to_f32(w.scale[e / kMxfp4Group]))};
    }
    static __m512 madd(__m512 acc, __m512i x, const Mxfp4Group& w) {
        return _mm512_fmadd_ps(_mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)x, (__m512bh)w.q), w.s, acc);
    }
    static float x1(const uint16_t* x, int64_t i) { return bf16_to_f32(x[i]); }   // no tail: I % 32 == 0
    static float w1(const WRef& w, int64_t e) {
        if constexpr (kScratch) return bf16_to_f32(static_cast<const uint16_t*>(w.data)[e]) * e8m0_to_f32(w.scale[e / kMxfp4Group]);
        else return mxfp4_element(static_cast<const uint8_t*>(w.data), w.scale, e);
    }
};

// f32 activations × weights of dtype DT, widened exactly to f32 in registers.
template <DType DT>
struct DotF32Mode {
    using X = float;
    static constexpr DType kW = DT;
    static constexpr int64_t kStep = 16;
    static __m512 x_at(const float* x, int64_t i) { return _mm512_loadu_ps(x + i); }
    static __m512 w_at(const WRef& w, int64_t e) {
        if constexpr (DT == DType::kF32) {
            return _mm512_loadu_ps(static_cast<const float*>(w.data) + e);
        } else if constexpr (DT == DType::kMXFP4) {
            return mxfp4_16(w, e);
        } else {
            const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w.data) + e));
            if constexpr (DT == DType::kBF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            else return _mm512_cvtph_ps(h);
        }
    }
    static __m512 madd(__m512 acc, __m512 x, __m512 w) { return _mm512_fmadd_ps(x, w, acc); }
    static float x1(const float* x, int64_t i) { return x[i]; }
    static float w1(const WRef& w, int64_t e) { return weight1(DT, w, e); }
};

// The operands of one product in a mode: token rows x (ldx apart), weight rows w (`in` apart).
template <class M>
struct Operands {
    const typename M::X* x;
    int64_t ldx;
    WRef w;   // row 0 of the rows addressed below
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
    const char* ahead = static_cast<const char*>(op.w.data) + weight_byte(M::kW, w0 + kPrefetchRows * in);
    for (int64_t i = 0; i < in_v; i += M::kStep) {
        decltype(M::x_at(xr[0], 0)) xv[NT];
        for (int j = 0; j < NT; ++j) xv[j] = M::x_at(xr[j], i);
        for (int r = 0; r < NR; ++r) {
            const auto wv = M::w_at(op.w, w0 + r * in + i);
            for (int j = 0; j < NT; ++j) acc[j][r] = M::madd(acc[j][r], xv[j], wv);
        }
        if (n_pf > 0 && weight_byte(M::kW, i) % 64 == 0)
            for (int r = 0; r < n_pf; ++r) _mm_prefetch(ahead + weight_byte(M::kW, r * in + i), _MM_HINT_T0);
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
    for (; t + 6 <= t1; t += 6) tile<M, NR, 6>(a, op, t, o, wrow);
    switch (t1 - t) {
        case 5: return tile<M, NR, 5>(a, op, t, o, wrow);
        case 4: return tile<M, NR, 4>(a, op, t, o, wrow);
        case 3: return tile<M, NR, 3>(a, op, t, o, wrow);
        case 2: return tile<M, NR, 2>(a, op, t, o, wrow);
        case 1: return tile<M, NR, 1>(a, op, t, o, wrow);
        default: return;
    }
}

// Weight rows per block: as many as keep the block within a fifth of this core's L2 (the rest
// holds the token rows passing through and the next block being prefetched), a multiple of 4.
int64_t row_block(int64_t row_bytes) {
    static const int64_t block_bytes = std::clamp<int64_t>(cache_sizes().l2 / 5, int64_t(64) << 10, int64_t(1) << 20);
    return std::clamp<int64_t>((block_bytes / std::max<int64_t>(row_bytes, 1)) / 4 * 4, 4, kMaxRowBlock);
}

template <class M>
void blocked_range(const MatmulArgs& a, const Operands<M>& op, int64_t o_begin, int64_t o_end) {
    const int64_t rb = row_block(weight_byte(M::kW, a.in));
    for (int64_t o = o_begin; o < o_end; o += rb) {
        const int64_t n_w = std::min(rb, o_end - o), next_rows = std::min(rb, o_end - o - n_w);
        const char* next = static_cast<const char*>(op.w.data) + weight_byte(M::kW, (o + n_w) * a.in);
        const size_t next_bytes = size_t(weight_byte(M::kW, next_rows * a.in));
        size_t pf = 0;   // the next block's bytes prefetched so far, spread over this block's tiles
        for (int64_t t = 0; t < a.n_rows; t += kTokBlock) {
            const int64_t t1 = std::min(a.n_rows, t + kTokBlock);
            int64_t r = 0;
            for (; r + 4 <= n_w; r += 4) {
                for (const size_t end = std::min(next_bytes, pf + size_t(weight_byte(M::kW, 4 * a.in))); pf < end; pf += 64)
                    _mm_prefetch(next + pf, _MM_HINT_T1);
                rows_tiles<M, 4>(a, op, t, t1, o + r, o + r);
            }
            for (; r < n_w; ++r) rows_tiles<M, 1>(a, op, t, t1, o + r, o + r);
        }
    }
}

// Many token rows with weights that are decoded first (f32 mode: bf16/f16/MXFP4 widened to
// f32; bf16 mode: MXFP4 decoded to bf16): each block of weight rows decoded once into the
// per-thread scratch by DM::w_at, then the micro-tiles of mode MS run over the scratch.
template <class DM, class MS>
void decoded_range(const MatmulArgs& a, const typename MS::X* x, int64_t ldx, int64_t o_begin, int64_t o_end, void* scratch) {
    using Vec = decltype(MS::w_at(WRef{nullptr}, 0));
    constexpr int64_t kLanes = int64_t(sizeof(Vec)) / int64_t(weight_byte(MS::kW, 1));   // elements per vector
    const int64_t in = a.in, rb = row_block(weight_byte(MS::kW, in));
    const WRef src{a.w, a.w_scale};
    const Operands<MS> op{x, ldx, WRef{scratch}};
    for (int64_t o = o_begin; o < o_end; o += rb) {
        const int64_t n_w = std::min(rb, o_end - o), n = n_w * in, nv = n - n % kLanes, e0 = o * in;
        for (int64_t i = 0; i < nv; i += kLanes)
            _mm512_storeu_si512(static_cast<char*>(scratch) + weight_byte(MS::kW, i), (__m512i)DM::w_at(src, e0 + i));
        for (int64_t i = nv; i < n; ++i) {
            const float v = DM::w1(src, e0 + i);
            if constexpr (MS::kW == DType::kF32) static_cast<float*>(scratch)[i] = v;
            else static_cast<uint16_t*>(scratch)[i] = f32_to_bf16(v);   // exact: the value is a bf16
        }
        for (int64_t t = 0; t < a.n_rows; t += kTokBlock) {
            const int64_t t1 = std::min(a.n_rows, t + kTokBlock);
            int64_t r = 0;
            for (; r + 4 <= n_w; r += 4) rows_tiles<MS, 4>(a, op, t, t1, o + r, r);
            for (; r < n_w; ++r) rows_tiles<MS, 1>(a, op, t, t1, o + r, r);
        }
    }
}

template <DType DT>
void f32_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.n_rows <= kDirectMaxRows) return direct_range(a, Operands<DotF32Mode<DT>>{a.x, a.ldx, WRef{a.w, a.w_scale}}, o_begin, o_end);
    if constexpr (DT == DType::kF32) blocked_range(a, Operands<DotF32Mode<DT>>{a.x, a.ldx, WRef{a.w}}, o_begin, o_end);
    else decoded_range<DotF32Mode<DT>, DotF32Mode<DType::kF32>>(a, a.x, a.ldx, o_begin, o_end, scratch);
}

// bf16 × MXFP4, many token rows: each block of weight rows decoded once into the scratch as
// unscaled bf16 values followed by its scale bytes, then the same micro-tiles and arithmetic.
void mxfp4_bf16_blocked(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    using MS = Mxfp4Bf16Mode<true>;
    const int64_t in = a.in, rb = row_block(weight_byte(DType::kBF16, in));
    auto* q = reinterpret_cast<uint16_t*>(scratch);
    for (int64_t o = o_begin; o < o_end; o += rb) {
        const int64_t n_w = std::min(rb, o_end - o), n = n_w * in;
        auto* s = reinterpret_cast<uint8_t*>(q + n);
        const auto* packed = static_cast<const uint8_t*>(a.w) + o * in / 2;
        for (int64_t i = 0; i < n; i += 32) _mm512_storeu_si512(q + i, e2m1_bf16_32(packed + i / 2));
        std::memcpy(s, a.w_scale + o * in / kMxfp4Group, size_t(n / kMxfp4Group));
        const Operands<MS> op{a.xb, in, WRef{q, s}};
        for (int64_t t = 0; t < a.n_rows; t += kTokBlock) {
            const int64_t t1 = std::min(a.n_rows, t + kTokBlock);
            int64_t r = 0;
            for (; r + 4 <= n_w; r += 4) rows_tiles<MS, 4>(a, op, t, t1, o + r, r);
            for (; r < n_w; ++r) rows_tiles<MS, 1>(a, op, t, t1, o + r, r);
        }
    }
}

void bf16_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.w_dtype == DType::kMXFP4) {
        if (a.n_rows <= kDirectMaxRows) return direct_range(a, Operands<Mxfp4Bf16Mode<false>>{a.xb, a.in, WRef{a.w, a.w_scale}}, o_begin, o_end);
        return mxfp4_bf16_blocked(a, o_begin, o_end, scratch);
    }
    const Operands<DotBf16Mode> op{a.xb, a.in, WRef{a.w}};
    if (a.n_rows <= kDirectMaxRows) return direct_range(a, op, o_begin, o_end);
    blocked_range(a, op, o_begin, o_end);
}

}  // namespace

void bf16_round_rows_avx512(const float* x, int64_t n_rows, int64_t ldx, int64_t in, float* xr, uint16_t* xb) {
    bf16_round_rows_body(x, n_rows, ldx, in, xr, xb);
}

void matmul_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.xb && (a.w_dtype == DType::kBF16 || a.w_dtype == DType::kMXFP4)) return bf16_range(a, o_begin, o_end, scratch);
    switch (a.w_dtype) {
        case DType::kBF16: return f32_range<DType::kBF16>(a, o_begin, o_end, scratch);
        case DType::kF16: return f32_range<DType::kF16>(a, o_begin, o_end, scratch);
        case DType::kMXFP4: return f32_range<DType::kMXFP4>(a, o_begin, o_end, scratch);
        default: return f32_range<DType::kF32>(a, o_begin, o_end, scratch);
    }
}

}  // namespace kimi::cpu
