// The factored bf16 product of Q4_K and Q6_K weights in a sub-block lane order (bf16
// activations, AVX-512 BF16; docs/gguf.md#types). quant_avx512.cpp applies a scale per
// 32-value chunk (one FMA per vdpbf16ps); here each vdpbf16ps lane stays within one sub-block
// over a group of 2-4 registers, so a 256-value block takes 8 vdpbf16ps and 3 (Q4_K) or 5 (Q6_K)
// FMAs per (row, token):
//
// - Codes as bf16 without a lookup: 0x3F80 | u << (7 − bits) is the bf16 value 1 + u/2^bits
//   (exact) for the unsigned code u. Q4_K (w = s·u − m, 4 bits): c = 1 + u/16 and a sub-block's
//   Σ w·x = 16s·Σ c·x − (16s + m)·X, X = Σ x; Q6_K (w = s·(u − 32), 6 bits): c = 1 + u/64 and
//   Σ w·x = 64s·Σ c·x − 96s·X.
// - Q4_K: the 128 code bytes, as A (sub-blocks 0-3) and B (4-7), are regrouped by 128-bit lane
//   (shuffle_i64x2) into C1 = bytes 0-15 and C2 = bytes 16-31 of each 32-byte group g (sub-block
//   2g: low nibbles, 2g + 1: high nibbles), so lane L of a register holds group L. Each nibble is
//   shifted into bits 3-6 of its 16-bit word and merged with 0x3F80 by one ternlog, no other
//   shuffle: register 4h + 2c + e (h: low/high nibbles, c: C1/C2, e: even/odd byte) holds in lane L,
//   word j, value 16c + 2j + e of sub-block 2L + h: two groups of 4 registers.
// - Q6_K: the 64 low-bit bytes of each half h hold in 128-bit lane L sub-block 8h + L (low
//   nibbles) and 8h + 4 + L (high nibbles), 16 values each; the high bits come from the half's
//   32 qh bytes, broadcast to both 256-bit halves and shifted by 0 or 2 per lane. Bytes
//   0x80 | u << 1, unpacked with 0x3F: registers 2g, 2g + 1 (values 0-7, 8-15) hold sub-block
//   4g + L in lane L: four groups of 2 registers.
// - The activations are rounded once per product into the same order
//   (bf16_round_rows_lanes_avx512 below), with the sum X of each sub-block beside them.
// - Per (row, token) and block: for each group, p = Σ of its registers' vdpbf16ps (from zero) and
//   acc += p·S_g (S_g: the scale factor of each lane's sub-block); then acc += M·X (M: the
//   sub-blocks' offsets, zero past the last); at the end hsum16(acc). Every (row, token) pair
//   takes these steps whatever the batch, tile or thread.
// Tests: tests/ops/block_quant_test.cpp (against the reference product, batch invariance).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/avx512_util.h"
#include "backend/cpu/kernels/block_panels_avx512.h"
#include "backend/cpu/kernels/kquant_avx512.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {

namespace {

constexpr int64_t kElems = 256;   // values per block (both types)

// A Q4_K block prepared for the product.
struct Q4_KLanes {
    static constexpr int64_t kElems = 256, kBytes = 144;
    static constexpr int kFamily = 0, kGroups = 2;
    __m512i codes[8];
    __m512 s[kGroups], m;
    void prepare(const uint8_t* b) {
        // lanes 0-7: 16·d·sc_j (exact: 16·d is), lanes 8-15: −dmin·mn_j
        const __m512 sm = k_scales16(b + 4, 16.0f * f16_value(b), f16_value(b + 2));
        s[0] = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6), sm);
        s[1] = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7), sm);
        const __m512 mins =
            _mm512_permutexvar_ps(_mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0), sm);
        m = _mm512_maskz_sub_ps(0x00FF, mins, sm);   // −dmin·mn_j − 16·d·sc_j
        const __m512i a = _mm512_loadu_si512(b + 16), bb = _mm512_loadu_si512(b + 80);
        const __m512i c1 = _mm512_shuffle_i64x2(a, bb, _MM_SHUFFLE(2, 0, 2, 0)),
                      c2 = _mm512_shuffle_i64x2(a, bb, _MM_SHUFFLE(3, 1, 3, 1));
        // the bf16 word 0x3F80 | u << 3 of the nibble at bit `at` of each 16-bit word (a shift and
        // a ternlog: (w shifted & 0x78) | 0x3F80): bytes 2j, 2j + 1 of a 128-bit lane give words
        // j of the even and the odd register, low nibbles sub-block 2L, high 2L + 1
        const __m512i mask = _mm512_set1_epi16(0x78), one = _mm512_set1_epi16(0x3F80);
        const auto word = [&](__m512i v, int at) {
            const __m512i t = at <= 3 ? _mm512_slli_epi16(v, 3 - at) : _mm512_srli_epi16(v, at - 3);
            return _mm512_ternarylogic_epi32(t, mask, one, 0xEA);
        };
        for (int c = 0; c < 2; ++c) {
            const __m512i v = c == 0 ? c1 : c2;
            codes[2 * c + 0] = word(v, 0);        // low nibble, byte 2j
            codes[2 * c + 1] = word(v, 8);        // low nibble, byte 2j + 1
            codes[4 + 2 * c + 0] = word(v, 4);    // high nibble, byte 2j
            codes[4 + 2 * c + 1] = word(v, 12);   // high nibble, byte 2j + 1
        }
    }
};

// A Q6_K block prepared for the product.
struct Q6_KLanes {
    static constexpr int64_t kElems = 256, kBytes = 210;
    static constexpr int kFamily = 1, kGroups = 4;
    __m512i codes[8];
    __m512 s[kGroups], m;
    void prepare(const uint8_t* b) {
        // 64·d·sc_j for the 16 sub-blocks (exact: 64·d is, and d·sc is), then the offsets −96·d·sc_j
        const __m512 s16 = _mm512_mul_ps(
            _mm512_set1_ps(64.0f * f16_value(b + 208)),
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)))));
        for (int g = 0; g < kGroups; ++g)
            s[g] = _mm512_permutexvar_ps(
                _mm512_add_epi32(_mm512_set1_epi32(4 * g),
                                 _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)),
                s16);
        m = _mm512_mul_ps(s16, _mm512_set1_ps(-1.5f));
        const __m512i sel = _mm512_set1_epi8(0x1E), keep = _mm512_set1_epi8(0x7E), top = _mm512_set1_epi8(char(0x80)),
                      hi_byte = _mm512_set1_epi8(0x3F);
        const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(b + 64 * h);
            const __m512i qh = _mm512_srlv_epi16(
                _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h))), shifts);
            // byte 0x80 | u << 1, u = low bits (at bits 1-4) | high 2 bits (at bits 5-6)
            const auto code = [&](__m512i low, __m512i high) {
                return _mm512_ternarylogic_epi32(_mm512_ternarylogic_epi32(sel, low, high, 0xCA), keep, top, 0xEA);
            };
            const __m512i lo = code(_mm512_slli_epi16(ql, 1), _mm512_slli_epi16(qh, 5)),
                          hi = code(_mm512_srli_epi16(ql, 3), _mm512_slli_epi16(qh, 1));
            codes[4 * h + 0] = _mm512_unpacklo_epi8(lo, hi_byte);
            codes[4 * h + 1] = _mm512_unpackhi_epi8(lo, hi_byte);
            codes[4 * h + 2] = _mm512_unpacklo_epi8(hi, hi_byte);
            codes[4 * h + 3] = _mm512_unpackhi_epi8(hi, hi_byte);
        }
    }
};

// One row's block k against NT token rows: per group p = Σ vdpbf16ps from zero, acc += p·S_g; then
// acc += M·X. The same steps whether the block was prepared ahead or just now.
template <class B, int NT>
inline __attribute__((always_inline)) void lanes_block(const MatmulArgs& a, int64_t t0, int64_t k, const B& blk,
                                                       const __m512 (&xs)[NT], __m512 (&acc)[NT]) {
    constexpr int kPerGroup = 8 / B::kGroups;
#pragma GCC unroll 4
    for (int g = 0; g < B::kGroups; ++g) {
        __m512 p[NT];
        for (int t = 0; t < NT; ++t) p[t] = _mm512_setzero_ps();
#pragma GCC unroll 4
        for (int v = kPerGroup * g; v < kPerGroup * (g + 1); ++v)
            for (int t = 0; t < NT; ++t)
                p[t] = _mm512_dpbf16_ps(p[t], (__m512bh)blk.codes[v],
                                        (__m512bh)_mm512_loadu_si512(a.xq + (t0 + t) * a.in + k * kElems + 32 * v));
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_fmadd_ps(p[t], blk.s[g], acc[t]);
    }
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_fmadd_ps(blk.m, xs[t], acc[t]);
}

// The sub-block sums X of block k for NT token rows (zero past the block's sub-blocks).
template <class B, int NT>
inline __attribute__((always_inline)) void lanes_sums(const MatmulArgs& a, int64_t t0, int64_t k, __m512 (&xs)[NT]) {
    constexpr int kSub = int(kElems / lane_sub_elems(B::kFamily));
    const int64_t n_sub = a.in / lane_sub_elems(B::kFamily);
    for (int t = 0; t < NT; ++t)
        xs[t] = _mm512_maskz_loadu_ps(__mmask16((1u << kSub) - 1), a.xq_sums + (t0 + t) * n_sub + k * kSub);
}

// NR weight rows × NT token rows over the whole reduction, the rows' blocks prepared already
// (pre: [NR][blocks]; prefill): each code register is read once for the NT token rows.
template <class B, int NR, int NT>
void lanes_tile(const MatmulArgs& a, int64_t t0, int64_t o, const B* pre) {
    constexpr int kPerGroup = 8 / B::kGroups;
    const int64_t in = a.in, nblk = in / kElems;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nblk; ++k) {
        const B* blk[NR];
        for (int r = 0; r < NR; ++r) blk[r] = pre + r * nblk + k;
#pragma GCC unroll 4
        for (int g = 0; g < B::kGroups; ++g) {   // (unrolled: the accumulators stay in registers)
            __m512 p[NR][NT];
            for (int r = 0; r < NR; ++r)
                for (int t = 0; t < NT; ++t) p[r][t] = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int v = kPerGroup * g; v < kPerGroup * (g + 1); ++v) {
                __m512i xv[NT];
                for (int t = 0; t < NT; ++t) xv[t] = _mm512_loadu_si512(a.xq + (t0 + t) * in + k * kElems + 32 * v);
                for (int r = 0; r < NR; ++r)
                    for (int t = 0; t < NT; ++t)
                        p[r][t] = _mm512_dpbf16_ps(p[r][t], (__m512bh)blk[r]->codes[v], (__m512bh)xv[t]);
            }
            for (int r = 0; r < NR; ++r)
                for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(p[r][t], blk[r]->s[g], acc[r][t]);
        }
        __m512 xs[NT];
        lanes_sums<B, NT>(a, t0, k, xs);
        for (int t = 0; t < NT; ++t)
            for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(blk[r]->m, xs[t], acc[r][t]);
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[(t0 + t) * a.ldy + o + r] = hsum16(acc[r][t]);
}

// NR rows × NT (≤ 3) token rows, each block prepared as it streams through and used at once
// (decode), the rows kBlockPrefetchAhead ahead (before o_end) prefetched block by block.
template <class B, int NR, int NT>
void lanes_stream_tile(const MatmulArgs& a, int64_t o, int64_t o_end) {
    const int64_t nblk = a.in / kElems, row_bytes = nblk * B::kBytes;
    const auto* w = static_cast<const uint8_t*>(a.w) + o * row_bytes;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    const int64_t n_pf = rows_to_prefetch(o, o_end, NR);
    for (int64_t k = 0; k < nblk; ++k) {
        prefetch_rows_ahead<B>(w, row_bytes, k, n_pf);
        __m512 xs[NT];
        lanes_sums<B, NT>(a, 0, k, xs);
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r) {
            B blk;
            blk.prepare(w + r * row_bytes + k * B::kBytes);
            lanes_block<B, NT>(a, 0, k, blk, xs, acc[r]);
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[t * a.ldy + o + r] = hsum16(acc[r][t]);
}

// Token rows [t0, t1) against NR rows whose blocks are prepared (pre), 3 token rows a tile
// (4 × 3 pairs: acc and p take 24 registers).
template <class B, int NR>
void lanes_tokens(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t o, const B* pre) {
    int64_t t = t0;
    for (; t + 3 <= t1; t += 3) lanes_tile<B, NR, 3>(a, t, o, pre);
    if (t1 - t == 2) lanes_tile<B, NR, 2>(a, t, o, pre);
    if (t1 - t == 1) lanes_tile<B, NR, 1>(a, t, o, pre);
}

template <class B, int NT>
void lanes_streaming(const MatmulArgs& a, int64_t o_begin, int64_t o_end) {
    int64_t o = o_begin;
    for (; o + 4 <= o_end; o += 4) lanes_stream_tile<B, 4, NT>(a, o, o_end);
    for (; o < o_end; ++o) lanes_stream_tile<B, 1, NT>(a, o, o_end);
}

// Up to 3 token rows: each block prepared as it streams through. More: panels of
// kMatmulColumnBlock rows, each block of a panel prepared once into scratch; the token rows
// then go through the panel in groups whose activations fit a quarter of L2, so each group is
// read from L2 by all the panel's row tiles.
template <class B>
void lanes_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, void* scratch) {
    switch (a.n_rows) {
        case 1: return lanes_streaming<B, 1>(a, o_begin, o_end);
        case 2: return lanes_streaming<B, 2>(a, o_begin, o_end);
        case 3: return lanes_streaming<B, 3>(a, o_begin, o_end);
        default: break;
    }
    prepared_panels(
        a, o_begin, o_end, static_cast<B*>(scratch), 3,
        [&](int64_t t0, int64_t t1, int64_t o, const B* rows) { lanes_tokens<B, 4>(a, t0, t1, o, rows); },
        [&](int64_t t0, int64_t t1, int64_t o, const B* rows) { lanes_tokens<B, 1>(a, t0, t1, o, rows); });
}

// The word order of a 32-word register split into its even words, then its odd ones.
struct EvenOdd {
    alignas(64) uint16_t v[32];
    constexpr EvenOdd() : v{} {
        for (int i = 0; i < 16; ++i) v[i] = uint16_t(2 * i), v[16 + i] = uint16_t(2 * i + 1);
    }
};
constexpr EvenOdd kEvenOdd;

}   // namespace

void bf16_round_rows_lanes_avx512(int family, const float* x, int64_t n_rows, int64_t ldx, int64_t in, uint16_t* xq,
                                  float* sums) {
    const __m512i ones = (__m512i)_mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
    const int64_t sub = lane_sub_elems(family), n_sub = in / sub;
    alignas(64) uint16_t nat[kElems];
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t k = 0; k < in / kElems; ++k) {
            const float* src = x + t * ldx + k * kElems;
            for (int64_t i = 0; i < kElems; ++i) nat[i] = f32_to_bf16(src[i]);
            // X of each sub-block: the rounded values summed pairwise (vdpbf16ps by ones), then the
            // lanes in hsum order (16 lanes a 32-value sub-block, 8 a 16-value one)
            float* xs = sums + t * n_sub + k * (kElems / sub);
            for (int64_t j = 0; j < kElems / 32; ++j) {
                const __m512 p =
                    _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)_mm512_load_si512(nat + 32 * j), (__m512bh)ones);
                if (sub == 32) {
                    xs[j] = hsum16(p);
                } else {
                    xs[2 * j] = hsum16(_mm512_maskz_mov_ps(0x00FF, p));
                    xs[2 * j + 1] = hsum16(_mm512_maskz_mov_ps(0xFF00, p));
                }
            }
            // register v, 128-bit lane l: 8 values of a sub-block (the layouts in the header)
            uint16_t* dst = xq + t * in + k * kElems;
            if (family == 0) {   // sub-block j's even values, then its odd ones (one vpermw); the
                                 // 8-value quarters go to lane j / 2 of registers 4·(j % 2) + {0, 2, 1, 3}
                const __m512i even_odd = _mm512_load_si512(kEvenOdd.v);
                for (int j = 0; j < 8; ++j) {
                    const __m512i p = _mm512_permutexvar_epi16(even_odd, _mm512_load_si512(nat + 32 * j));
                    uint16_t* d = dst + 32 * (4 * (j % 2)) + 8 * (j / 2);
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm512_castsi512_si128(p));
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 64), _mm512_extracti32x4_epi32(p, 1));
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32), _mm512_extracti32x4_epi32(p, 2));
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 96), _mm512_extracti32x4_epi32(p, 3));
                }
            } else {
                for (int v = 0; v < 8; ++v)
                    for (int l = 0; l < 4; ++l)
                        std::memcpy(dst + 32 * v + 8 * l, nat + 16 * (4 * (v / 2) + l) + 8 * (v % 2), 16);
            }
        }
    }
}

bool block_lanes_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (!a.xq) return false;
    static_assert(sizeof(Q4_KLanes) / kElems <= 4 && sizeof(Q6_KLanes) / kElems <= 4,
                  "a panel of prepared rows must fit in the scratch (4 bytes per value)");
    switch (a.w_dtype) {
        case DType::kQ4_K: lanes_range<Q4_KLanes>(a, o_begin, o_end, scratch); return true;
        case DType::kQ6_K: lanes_range<Q6_KLanes>(a, o_begin, o_end, scratch); return true;
        default: return false;
    }
}

}   // namespace kimi::cpu
