// AVX-512 matrix-product kernels (this TU alone is compiled with -mavx512f/bw/vl/bf16 and is
// only called after cpu_features() confirmed them; bf16 activations × bf16 weights are the lane
// order's, kernels/matmul_outer_avx512.cpp). Two operand modes:
// - bf16 activations × MXFP4 weights: vdpbf16ps on the activations rounded to bf16 and the
//   weights decoded exactly to bf16 in registers (vpermw of the nibbles in a LUT of E2M1 ×
//   2^125, then one saturating 16-bit subtract of (252 − s) << 7 applies the group scale
//   2^(s − 127)). Per output element: 16 lanes, each adding its pair of products (odd element,
//   then even) per 32 elements, with
//   weights and activations in the span order (128 columns: column 4w + n in lane w of vector
//   n, matmul_kernel.h); scale bytes outside [2, 252] take an exact slower decode, tile by tile;
// - f32 activations (any weight dtype; also bf16 activations with f16/f32 weights): 512-bit
//   FMA on weights widened exactly to f32, 16 lanes, lane l summing i ≡ l (mod 16) in index
//   order for i < I − I % 16.
// Either way the lanes are then reduced in a fixed order (upper half onto lower, then as the
// AVX2 kernel) and the tail added in order. Two paths with that one order, so a row's result
// depends on nothing but that row:
// - few token rows: weights streamed from memory 8 or 4 rows at a time, prefetched ahead;
// - many token rows: blocks of weight rows (f32: as stored, the next block prefetched into
//   L2 meanwhile; otherwise decoded once into a per-thread scratch, MXFP4 to bf16 in span
//   order) against 6-token × 4-row micro-tiles over the whole reduction, accumulators in registers.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/avx512_util.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {
namespace {

// How far ahead (in weight rows) the direct path prefetches, into L2: into L1 the prefetches
// compete with the demand loads (bf16 batch-1 decode of the bench preset 20-21 → 27-28 tok/s
// with L2; 32 rows ahead instead of 16 changed nothing; docs/performance.md).
constexpr int64_t kPrefetchRows = 16;
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
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f,
                                      -3.0f, -4.0f, -6.0f);
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

// bf16 activations × bf16 weights (the MXFP4 weights decoded to bf16): vdpbf16ps.
struct DotBf16Mode {
    using X = uint16_t;
    static constexpr DType kW = DType::kBF16;
    static constexpr int64_t kStep = 32;
    static __m512i x_at(const uint16_t* x, int64_t i) { return _mm512_loadu_si512(x + i); }
    static __m512i w_at(const WRef& w, int64_t e) {
        return _mm512_loadu_si512(static_cast<const uint16_t*>(w.data) + e);
    }
    static __m512 madd(__m512 acc, __m512i x, __m512i w) {
        return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);   // same-size vector reinterpretation
    }
    static float x1(const uint16_t* x, int64_t i) { return bf16_to_f32(x[i]); }
    static float w1(const WRef& w, int64_t e) { return bf16_to_f32(static_cast<const uint16_t*>(w.data)[e]); }
};

// bf16 activations × MXFP4 weights: the weights decoded straight to their scaled bf16 values
// and fed to vdpbf16ps as DotBf16Mode feeds bf16 weights, in the span order
// (matmul_kernel.h). A span is 128 columns of a row: 64 packed bytes, 4 groups. Its 16-bit
// word w holds columns 4w..4w+3 in its 4 nibbles, so (word >> 4n) indexes column 4w + n in
// lane w; lanes 8g..8g+7 are then group g, i.e. 128-bit lane g. Vector n of a span holds
// columns 4w + n (w = 0..31); the activations come in the same order (MatmulArgs::xp). A
// trailing partial span stays in natural order, one group per vector.
constexpr int64_t kSpan = 128;   // columns per span

// The decode: vpermw looks the nibble up in kScaledLut = E2M1 v × 2^125 as bf16 (±0 both as
// +0; vpermw reads 5 index bits, the next nibble's lowest among them, so the 16 entries are
// repeated), then one unsigned saturating subtract of T = (252 − s) << 7 from the 16-bit word
// lowers the exponent field by 252 − s: v × 2^125 × 2^(s − 252) = v × 2^(s − 127), exactly.
// For s in [2, 252] every nonzero value keeps a normal exponent (1..254) with no borrow into
// the sign bit, and 0 − T saturates to 0. Other scale bytes take the exact decode below.
alignas(64) constexpr uint16_t kScaledLut[32] = {0, 0x7d80, 0x7e00, 0x7e40, 0x7e80, 0x7ec0, 0x7f00, 0x7f40,
                                                 0, 0xfd80, 0xfe00, 0xfe40, 0xfe80, 0xfec0, 0xff00, 0xff40,
                                                 0, 0x7d80, 0x7e00, 0x7e40, 0x7e80, 0x7ec0, 0x7f00, 0x7f40,
                                                 0, 0xfd80, 0xfe00, 0xfe40, 0xfe80, 0xfec0, 0xff00, 0xff40};

// The scale bytes of a tile (n, contiguous from s) as the words T = (252 − s) << 7 into t
// (n rounded up to 32 words written); whether all of them lie in [2, 252], i.e. whether the
// fast decode is exact for the tile: (s − 2) mod 256 ≤ 250.
inline bool scale_words(const uint8_t* s, int64_t n, uint16_t* t) {
    const __m256i two = _mm256_set1_epi8(2);
    __m256i m = _mm256_setzero_si256();
    for (int64_t i = 0; i < n; i += 32) {
        const __mmask32 k = n - i >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - i)) - 1);
        const __m256i b = _mm256_mask_loadu_epi8(two, k, s + i);   // lanes past n read as 2
        m = _mm256_max_epu8(m, _mm256_sub_epi8(b, two));
        const __m512i w = _mm512_cvtepu8_epi16(b);
        _mm512_storeu_si512(t + i, _mm512_sub_epi16(_mm512_set1_epi16(252 << 7), _mm512_slli_epi16(w, 7)));
    }
    return _mm256_cmpgt_epu8_mask(m, _mm256_set1_epi8(char(250))) == 0;
}

// T of a span: word g of t (the span's 4 T words) in every word of 128-bit lane g.
inline __m512i span_shift(const uint16_t* t) {
    int64_t t4;
    std::memcpy(&t4, t, 8);
    const __m512i ctrl = _mm512_setr_epi32(0x01000100, 0x01000100, 0x01000100, 0x01000100, 0x03020302, 0x03020302,
                                           0x03020302, 0x03020302, 0x05040504, 0x05040504, 0x05040504, 0x05040504,
                                           0x07060706, 0x07060706, 0x07060706, 0x07060706);
    return _mm512_shuffle_epi8(_mm512_set1_epi64(t4), ctrl);
}

// Fast decode of the span at packed bytes p (64) with T words t (4): w[n] lane w = column 4w + n.
inline void span_fast(const uint8_t* p, const uint16_t* t, __m512i lut, __m512i (&w)[4]) {
    const __m512i q = _mm512_loadu_si512(p), t4 = span_shift(t);
    w[0] = _mm512_subs_epu16(_mm512_permutexvar_epi16(q, lut), t4);
    w[1] = _mm512_subs_epu16(_mm512_permutexvar_epi16(_mm512_srli_epi16(q, 4), lut), t4);
    w[2] = _mm512_subs_epu16(_mm512_permutexvar_epi16(_mm512_srli_epi16(q, 8), lut), t4);
    w[3] = _mm512_subs_epu16(_mm512_permutexvar_epi16(_mm512_srli_epi16(q, 12), lut), t4);
}

// Fast decode of one group in natural order: packed bytes p (16), T word t. Byte k widened
// to dword k: word 2k = the byte (low nibble in bits 0..3), word 2k + 1 = its high nibble.
inline __m512i group_fast(const uint8_t* p, uint16_t t, __m512i lut) {
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i idx = _mm512_or_si512(d, _mm512_slli_epi32(d, 12));
    return _mm512_subs_epu16(_mm512_permutexvar_epi16(idx, lut), _mm512_set1_epi16(int16_t(t)));
}

// 16 f32 values as bf16 bits, as f32_to_bf16 (exact for the MXFP4 values, which are bf16
// values, subnormals and infinities included; NaN kept quiet), ±0 as +0 like kScaledLut.
inline __m256i bf16_bits_16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v), mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    h = _mm512_mask_or_epi32(h, _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000)), _mm512_srli_epi32(u, 16),
                             _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_maskz_mov_epi32(_mm512_test_epi32_mask(mag, mag), h));
}

// Exact decode of one group in natural order: columns k..k+31 of the row at w (any scale byte).
inline __m512i group_exact(const WRef& w, int64_t k) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(bf16_bits_16(mxfp4_16(w, k))), bf16_bits_16(mxfp4_16(w, k + 16)),
                              1);
}

// Natural order → span order: out[n] lane w = column 4w + n of the 128 columns in nat[0..3].
inline void to_span_order(const __m512i (&nat)[4], __m512i (&out)[4]) {
    const __m512i base = _mm512_setr_epi32(0x00040000, 0x000c0008, 0x00140010, 0x001c0018, 0x00240020, 0x002c0028,
                                           0x00340030, 0x003c0038, 0x00040000, 0x000c0008, 0x00140010, 0x001c0018,
                                           0x00240020, 0x002c0028, 0x00340030, 0x003c0038);   // word w: 4 (w mod 16)
    for (int n = 0; n < 4; ++n) {
        const __m512i idx = _mm512_add_epi16(base, _mm512_set1_epi16(int16_t(n)));
        const __m512i lo = _mm512_permutex2var_epi16(nat[0], idx, nat[1]),
                      hi = _mm512_permutex2var_epi16(nat[2], idx, nat[3]);
        out[n] = _mm512_mask_blend_epi16(0xffff0000u, lo, hi);
    }
}

// One weight row as the decoders read it: packed bytes, scale bytes, their T words.
struct Mxfp4Row {
    const uint8_t* p;
    const uint8_t* s;
    const uint16_t* t;
};

// The span of columns k..k+127 of row w, in span order.
template <bool kExact>
inline void span_w(const Mxfp4Row& w, int64_t k, __m512i lut, __m512i (&out)[4]) {
    if constexpr (kExact) {
        const WRef r{w.p, w.s};
        const __m512i nat[4] = {group_exact(r, k), group_exact(r, k + 32), group_exact(r, k + 64),
                                group_exact(r, k + 96)};
        to_span_order(nat, out);
    } else {
        span_fast(w.p + k / 2, w.t + k / kMxfp4Group, lut, out);
    }
}

// The group of columns k..k+31 of row w, natural order.
template <bool kExact>
inline __m512i group_w(const Mxfp4Row& w, int64_t k, __m512i lut) {
    if constexpr (kExact)
        return group_exact(WRef{w.p, w.s}, k);
    else
        return group_fast(w.p + k / 2, w.t[k / kMxfp4Group], lut);
}

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
            const __m256i h =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w.data) + e));
            if constexpr (DT == DType::kBF16)
                return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            else
                return _mm512_cvtph_ps(h);
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
inline void finish(const MatmulArgs& a, const Operands<M>& op, const __m512 (&acc)[NT][NR],
                   const typename M::X* const (&xr)[NT], int64_t w0, int64_t t, int64_t o) {
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
            for (int r = 0; r < n_pf; ++r) _mm_prefetch(ahead + weight_byte(M::kW, r * in + i), _MM_HINT_T1);
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
                for (const size_t end = std::min(next_bytes, pf + size_t(weight_byte(M::kW, 4 * a.in))); pf < end;
                     pf += 64)
                    _mm_prefetch(next + pf, _MM_HINT_T1);
                rows_tiles<M, 4>(a, op, t, t1, o + r, o + r);
            }
            for (; r < n_w; ++r) rows_tiles<M, 1>(a, op, t, t1, o + r, o + r);
        }
    }
}

// Many token rows with weights that are decoded first (f32 mode: bf16/f16/MXFP4 widened to
// f32): each block of weight rows decoded once into the per-thread scratch by DM::w_at, then
// the micro-tiles of mode MS run over the scratch.
template <class DM, class MS>
void decoded_range(const MatmulArgs& a, const typename MS::X* x, int64_t ldx, int64_t o_begin, int64_t o_end,
                   void* scratch) {
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
            if constexpr (MS::kW == DType::kF32)
                static_cast<float*>(scratch)[i] = v;
            else
                static_cast<uint16_t*>(scratch)[i] = f32_to_bf16(v);   // exact: the value is a bf16
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
    if (a.n_rows <= kDirectMaxRows)
        return direct_range(a, Operands<DotF32Mode<DT>>{a.x, a.ldx, WRef{a.w, a.w_scale}}, o_begin, o_end);
    if constexpr (DT == DType::kF32)
        blocked_range(a, Operands<DotF32Mode<DT>>{a.x, a.ldx, WRef{a.w}}, o_begin, o_end);
    else
        decoded_range<DotF32Mode<DT>, DotF32Mode<DType::kF32>>(a, a.x, a.ldx, o_begin, o_end, scratch);
}

// bf16 × MXFP4. Every accumulator takes vdpbf16ps(acc, x' chunk, w' chunk) over the 32-column
// chunks of the span-ordered activations x' and weights w' in order, one accumulator per
// (token row, weight row), then hsum16: DotBf16Mode's arithmetic on P·x and P·W, so both paths
// equal the bf16-weight kernel on those operands bit for bit. The scale bytes of a tile (the
// direct path's NR rows, a blocked path's block) pick the fast or the exact decode, which give
// the same bits where both apply.

// One weight row decoded into q, I bf16 values in span order.
template <bool kExact>
void decode_row(const Mxfp4Row& w, int64_t in, uint16_t* q) {
    const __m512i lut = _mm512_load_si512(kScaledLut);
    const int64_t in_s = in - in % kSpan;
    for (int64_t k = 0; k < in_s; k += kSpan) {
        __m512i v[4];
        span_w<kExact>(w, k, lut, v);
        for (int n = 0; n < 4; ++n) _mm512_storeu_si512(q + k + 32 * n, v[n]);
    }
    for (int64_t k = in_s; k < in; k += kMxfp4Group) _mm512_storeu_si512(q + k, group_w<kExact>(w, k, lut));
}

// Direct path: NR weight rows from o × NT token rows from t, the packed bytes decoded in
// registers as they stream from memory; the packed rows kPrefetchRows ahead (and their scales)
// prefetched into L2 meanwhile (into L1, 8 lines per span compete with the demand loads:
// −40 % for I = 2048). tw: the T words of the NR rows (scale_words).
template <int NR, int NT, bool kExact>
inline void mxfp4_tile(const MatmulArgs& a, int64_t t, int64_t o, int64_t o_end, const uint16_t* tw) {
    const int64_t in = a.in, in_s = in - in % kSpan, prow = in / 2, srow = in / kMxfp4Group;
    const uint8_t* p = static_cast<const uint8_t*>(a.w) + o * prow;               // NR rows, prow bytes apart
    const uint8_t* s = a.w_scale + o * srow;                                      // NR rows, srow bytes apart
    const int64_t n_pf = std::clamp<int64_t>(o_end - o - kPrefetchRows, 0, NR);   // stay inside the range
    const char* ahead = reinterpret_cast<const char*>(p + kPrefetchRows * prow);
    for (int64_t b = 0; b < n_pf * srow; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(s + kPrefetchRows * srow + b), _MM_HINT_T1);
    const uint16_t* xr[NT];
    __m512 acc[NT][NR];
    for (int j = 0; j < NT; ++j) {
        xr[j] = a.xp + (t + j) * in;
        for (int r = 0; r < NR; ++r) acc[j][r] = _mm512_setzero_ps();
    }
    const __m512i lut = _mm512_load_si512(kScaledLut);
    for (int64_t k = 0; k < in_s; k += kSpan) {
        __m512i xv[NT][4];
        for (int j = 0; j < NT; ++j)
            for (int n = 0; n < 4; ++n) xv[j][n] = _mm512_loadu_si512(xr[j] + k + 32 * n);
        for (int r = 0; r < NR; ++r) {
            __m512i wv[4];
            span_w<kExact>(Mxfp4Row{p + r * prow, s + r * srow, tw + r * srow}, k, lut, wv);
            for (int j = 0; j < NT; ++j)
                for (int n = 0; n < 4; ++n) acc[j][r] = DotBf16Mode::madd(acc[j][r], xv[j][n], wv[n]);
        }
        for (int r = 0; r < n_pf; ++r) _mm_prefetch(ahead + r * prow + k / 2, _MM_HINT_T1);
    }
    for (int64_t k = in_s; k < in; k += kMxfp4Group) {   // the partial span, natural order
        __m512i xv[NT];
        for (int j = 0; j < NT; ++j) xv[j] = _mm512_loadu_si512(xr[j] + k);
        for (int r = 0; r < NR; ++r) {
            const __m512i wv = group_w<kExact>(Mxfp4Row{p + r * prow, s + r * srow, tw + r * srow}, k, lut);
            for (int j = 0; j < NT; ++j) acc[j][r] = DotBf16Mode::madd(acc[j][r], xv[j], wv);
        }
    }
    for (int j = 0; j < NT; ++j)
        for (int r = 0; r < NR; ++r) a.y[(t + j) * a.ldy + o + r] = hsum16(acc[j][r]);
}

// NR weight rows from o against every token row: 8 × 1 (batch 1 only), else 4 or 1 × {2, 1}.
template <int NR, bool kExact>
inline void mxfp4_rows_as(const MatmulArgs& a, int64_t o, int64_t o_end, const uint16_t* tw) {
    if constexpr (NR == 8) return mxfp4_tile<8, 1, kExact>(a, 0, o, o_end, tw);
    int64_t t = 0;
    for (; t + 2 <= a.n_rows; t += 2) mxfp4_tile<NR, 2, kExact>(a, t, o, o_end, tw);
    if (t < a.n_rows) mxfp4_tile<NR, 1, kExact>(a, t, o, o_end, tw);
}

// The rows' T words go to the scratch (NR · I/32 words, rounded up to 32).
template <int NR>
inline void mxfp4_rows(const MatmulArgs& a, int64_t o, int64_t o_end, uint16_t* tw) {
    const int64_t srow = a.in / kMxfp4Group;
    if (scale_words(a.w_scale + o * srow, NR * srow, tw)) return mxfp4_rows_as<NR, false>(a, o, o_end, tw);
    mxfp4_rows_as<NR, true>(a, o, o_end, tw);
}

void mxfp4_direct(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    auto* tw = reinterpret_cast<uint16_t*>(scratch);
    int64_t o = o_begin;
    if (a.n_rows == 1)
        for (; o + 8 <= o_end; o += 8) mxfp4_rows<8>(a, o, o_end, tw);
    for (; o + 4 <= o_end; o += 4) mxfp4_rows<4>(a, o, o_end, tw);
    for (; o < o_end; ++o) mxfp4_rows<1>(a, o, o_end, tw);
}

// Blocked path: each block of weight rows decoded once into the scratch ([rb, I] bf16 in span
// order, then the block's T words: rb ≤ kMaxRowBlock rows of I/2 + I/64 floats, within
// matmul_scratch_floats), then the bf16 micro-tiles over it; the next block's packed bytes
// prefetched into L2 over this block's tiles.
void mxfp4_blocked(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    const int64_t in = a.in, prow = in / 2, srow = in / kMxfp4Group, rb = row_block(weight_byte(DType::kBF16, in));
    auto* q = reinterpret_cast<uint16_t*>(scratch);
    uint16_t* tw = q + rb * in;
    const auto* packed = static_cast<const uint8_t*>(a.w);
    const Operands<DotBf16Mode> op{a.xp, in, WRef{q}};
    for (int64_t o = o_begin; o < o_end; o += rb) {
        const int64_t n_w = std::min(rb, o_end - o), next_rows = std::min(rb, o_end - o - n_w);
        const bool fast = scale_words(a.w_scale + o * srow, n_w * srow, tw);
        for (int64_t r = 0; r < n_w; ++r) {
            const Mxfp4Row w{packed + (o + r) * prow, a.w_scale + (o + r) * srow, tw + r * srow};
            if (fast)
                decode_row<false>(w, in, q + r * in);
            else
                decode_row<true>(w, in, q + r * in);
        }
        const char* next = reinterpret_cast<const char*>(packed + (o + n_w) * prow);
        const char* next_s = reinterpret_cast<const char*>(a.w_scale + (o + n_w) * srow);
        for (int64_t b = 0; b < next_rows * srow; b += 64) _mm_prefetch(next_s + b, _MM_HINT_T1);
        const size_t next_bytes = size_t(next_rows * prow);
        size_t pf = 0;   // the next block's bytes prefetched so far, spread over this block's tiles
        for (int64_t t = 0; t < a.n_rows; t += kTokBlock) {
            const int64_t t1 = std::min(a.n_rows, t + kTokBlock);
            int64_t r = 0;
            for (; r + 4 <= n_w; r += 4) {
                for (const size_t end = std::min(next_bytes, pf + size_t(4 * prow)); pf < end; pf += 64)
                    _mm_prefetch(next + pf, _MM_HINT_T1);
                rows_tiles<DotBf16Mode, 4>(a, op, t, t1, o + r, r);
            }
            for (; r < n_w; ++r) rows_tiles<DotBf16Mode, 1>(a, op, t, t1, o + r, r);
        }
    }
}

void mxfp4_bf16_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.n_rows <= kDirectMaxRows) return mxfp4_direct(a, o_begin, o_end, scratch);
    mxfp4_blocked(a, o_begin, o_end, scratch);
}

}   // namespace

void bf16_round_rows_avx512(const float* x, int64_t n_rows, int64_t ldx, int64_t in, float* xr, uint16_t* xb) {
    bf16_round_rows_body(x, n_rows, ldx, in, xr, xb);
}

void bf16_round_rows_spans_avx512(const float* x, int64_t n_rows, int64_t ldx, int64_t in, uint16_t* xp) {
    const int64_t in_s = in - in % kSpan;
    for (int64_t t = 0; t < n_rows; ++t) {
        const float* row = x + t * ldx;
        uint16_t* out = xp + t * in;
        for (int64_t k = 0; k < in_s; k += kSpan) {
            alignas(64) uint16_t nat[kSpan];
            bf16_round_rows_body(row + k, 1, kSpan, kSpan, nullptr, nat);
            const __m512i v[4] = {_mm512_load_si512(nat), _mm512_load_si512(nat + 32), _mm512_load_si512(nat + 64),
                                  _mm512_load_si512(nat + 96)};
            __m512i w[4];
            to_span_order(v, w);
            for (int n = 0; n < 4; ++n) _mm512_storeu_si512(out + k + 32 * n, w[n]);
        }
        bf16_round_rows_body(row + in_s, 1, in, in - in_s, nullptr, out + in_s);
    }
}

void matmul_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.xp && a.w_dtype == DType::kMXFP4) return mxfp4_bf16_range(a, o_begin, o_end, scratch);
    if ((a.xb || a.xv) && a.w_dtype == DType::kBF16) return outer_range_avx512(a, o_begin, o_end, scratch);
    switch (a.w_dtype) {
        case DType::kBF16: return f32_range<DType::kBF16>(a, o_begin, o_end, scratch);
        case DType::kF16: return f32_range<DType::kF16>(a, o_begin, o_end, scratch);
        case DType::kMXFP4: return f32_range<DType::kMXFP4>(a, o_begin, o_end, scratch);
        default: return f32_range<DType::kF32>(a, o_begin, o_end, scratch);
    }
}

}   // namespace kimi::cpu
