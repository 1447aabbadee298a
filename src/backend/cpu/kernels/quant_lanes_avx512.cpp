// The factored bf16 product of Q4_K weights in the sub-block lane order (bf16 activations, AVX-512
// BF16; docs/gguf.md#products). quant_avx512.cpp applies a scale per 32-value chunk (one FMA per
// vdpbf16ps); here every vdpbf16ps lane stays within one sub-block for a whole block, so a
// 256-value block takes 8 vdpbf16ps and 3 FMAs per (row, token):
//
// - Codes as bf16 without a lookup: 0x3F80 | q << 3 is the bf16 value 1 + q/16 (exact). With
//   c = 1 + q/16, a sub-block's sum Σ (s·q − m)·x = 16s·Σ c·x − (16s + m)·X, X = Σ x.
// - The 128 code bytes of a block, as two 64-byte registers A (sub-blocks 0-3) and B (4-7), are
//   regrouped by 128-bit lane (shuffle_i64x2) into C1 = bytes 0-15 and C2 = bytes 16-31 of each
//   32-byte group g (sub-blocks 2g: low nibbles, 2g + 1: high nibbles), so 128-bit lane L of a
//   register always holds group L. Each nibble becomes a byte 0x80 | q << 3 (shift, ternlog),
//   and unpacking those bytes with 0x3F gives the bf16 words: 8 registers of 32 codes, registers
//   0-3 with sub-block 2L in lane L (values 0-7, 8-15, 16-23, 24-31 of it), 4-7 with 2L + 1.
// - The activations are rounded once per product into the same order (x_lanes below), with
//   the sum X of each 32-value sub-block beside them.
// - Per (row, token) and block: p_lo = Σ over registers 0-3 of vdpbf16ps (from zero), p_hi over
//   4-7; acc += p_lo·S_lo, acc += p_hi·S_hi (S: 16s of each lane's sub-block), then
//   acc += M·X (M: lanes 0-7 −(16s + m) of sub-blocks 0-7, lanes 8-15 zero); at the end
//   hsum16(acc). Every (row, token) pair takes these steps whatever the batch, tile or thread.
// Tests: tests/ops/block_quant_test.cpp (against the scalar reference, batch invariance).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kernels/avx512_util.h"
#include "backend/cpu/kernels/kquant_avx512.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {

namespace {

constexpr int64_t kElems = 256, kSub = 8;   // values per block, sub-blocks per block

// A Q4_K block prepared for the product.
struct Q4_KLanes {
    static constexpr int64_t kBytes = 144;
    __m512i codes[8];
    __m512 s_lo, s_hi, m;
    void prepare(const uint8_t* b) {
        // lanes 0-7: 16·d·sc_j (exact: 16·d is), lanes 8-15: −dmin·mn_j
        const __m512 sm = k_scales16(b + 4, 16.0f * f16_value(b), f16_value(b + 2));
        s_lo = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6), sm);
        s_hi = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7), sm);
        const __m512 mins = _mm512_permutexvar_ps(_mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0), sm);
        m = _mm512_maskz_sub_ps(0x00FF, mins, sm);   // −dmin·mn_j − 16·d·sc_j
        const __m512i a = _mm512_loadu_si512(b + 16), bb = _mm512_loadu_si512(b + 80);
        const __m512i c1 = _mm512_shuffle_i64x2(a, bb, _MM_SHUFFLE(2, 0, 2, 0)),
                      c2 = _mm512_shuffle_i64x2(a, bb, _MM_SHUFFLE(3, 1, 3, 1));
        const __m512i mask = _mm512_set1_epi8(0x78), top = _mm512_set1_epi8(char(0x80)),
                      hi_byte = _mm512_set1_epi8(0x3F);
        // (v & 0x78) | 0x80 on bytes: the nibble at bits 3-6, under the bf16 mantissa's top bit
        const auto lo = [&](__m512i v) { return _mm512_ternarylogic_epi32(_mm512_slli_epi16(v, 3), mask, top, 0xEA); };
        const auto hi = [&](__m512i v) { return _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 1), mask, top, 0xEA); };
        const __m512i l1 = lo(c1), l2 = lo(c2), h1 = hi(c1), h2 = hi(c2);
        codes[0] = _mm512_unpacklo_epi8(l1, hi_byte);
        codes[1] = _mm512_unpackhi_epi8(l1, hi_byte);
        codes[2] = _mm512_unpacklo_epi8(l2, hi_byte);
        codes[3] = _mm512_unpackhi_epi8(l2, hi_byte);
        codes[4] = _mm512_unpacklo_epi8(h1, hi_byte);
        codes[5] = _mm512_unpackhi_epi8(h1, hi_byte);
        codes[6] = _mm512_unpacklo_epi8(h2, hi_byte);
        codes[7] = _mm512_unpackhi_epi8(h2, hi_byte);
    }
};

// NR weight rows × NT token rows over the whole reduction. kPre: the rows' blocks are prepared
// already (pre: [NR][blocks]); else each is prepared here as it streams through.
template <class B, int NR, int NT, bool kPre>
void lanes_tile(const MatmulArgs& a, int64_t t0, int64_t o, const B* pre) {
    const int64_t in = a.in, nblk = in / kElems, row_bytes = nblk * B::kBytes, n_sub = in / 32;
    const auto* w = static_cast<const uint8_t*>(a.w) + o * row_bytes;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    B own[NR];
    for (int64_t k = 0; k < nblk; ++k) {
        const B* blk[NR];
        for (int r = 0; r < NR; ++r) {
            if constexpr (kPre) {
                blk[r] = pre + r * nblk + k;
            } else {
                own[r].prepare(w + r * row_bytes + k * B::kBytes);
                blk[r] = &own[r];
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {   // (unrolled: the accumulators stay in registers)
            __m512 p[NR][NT];
            for (int r = 0; r < NR; ++r)
                for (int t = 0; t < NT; ++t) p[r][t] = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int v = 4 * h; v < 4 * h + 4; ++v) {
                __m512i xv[NT];
                for (int t = 0; t < NT; ++t) xv[t] = _mm512_loadu_si512(a.xq + (t0 + t) * in + k * kElems + 32 * v);
                for (int r = 0; r < NR; ++r)
                    for (int t = 0; t < NT; ++t)
                        p[r][t] = _mm512_dpbf16_ps(p[r][t], (__m512bh)blk[r]->codes[v], (__m512bh)xv[t]);
            }
            for (int r = 0; r < NR; ++r) {
                const __m512 s = h == 0 ? blk[r]->s_lo : blk[r]->s_hi;
                for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(p[r][t], s, acc[r][t]);
            }
        }
        for (int t = 0; t < NT; ++t) {
            const __m512 xs = _mm512_maskz_loadu_ps(0x00FF, a.xq_sums + (t0 + t) * n_sub + k * kSub);
            for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(blk[r]->m, xs, acc[r][t]);
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[(t0 + t) * a.ldy + o + r] = hsum16(acc[r][t]);
}

// Token rows [t0, t1) against NR rows whose blocks are prepared (pre), 3 token rows a tile
// (4 × 3 pairs: acc and p take 24 registers).
template <class B, int NR>
void lanes_tokens(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t o, const B* pre) {
    int64_t t = t0;
    for (; t + 3 <= t1; t += 3) lanes_tile<B, NR, 3, true>(a, t, o, pre);
    if (t1 - t == 2) lanes_tile<B, NR, 2, true>(a, t, o, pre);
    if (t1 - t == 1) lanes_tile<B, NR, 1, true>(a, t, o, pre);
}

template <class B, int NT>
void lanes_streaming(const MatmulArgs& a, int64_t o_begin, int64_t o_end) {
    int64_t o = o_begin;
    for (; o + 4 <= o_end; o += 4) lanes_tile<B, 4, NT, false>(a, 0, o, nullptr);
    for (; o < o_end; ++o) lanes_tile<B, 1, NT, false>(a, 0, o, nullptr);
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
    B* pre = static_cast<B*>(scratch);
    const int64_t nblk = a.in / kElems, row_bytes = nblk * B::kBytes;
    const int64_t group =
        std::max<int64_t>(3, int64_t(cache_sizes().l2) / 4 / (2 * a.in) / 3 * 3);   // token rows per group
    for (int64_t p0 = o_begin; p0 < o_end; p0 += kMatmulColumnBlock) {
        const int64_t p1 = std::min(o_end, p0 + kMatmulColumnBlock);
        const auto* w = static_cast<const uint8_t*>(a.w) + p0 * row_bytes;
        for (int64_t r = 0; r < p1 - p0; ++r)
            for (int64_t k = 0; k < nblk; ++k) pre[r * nblk + k].prepare(w + r * row_bytes + k * B::kBytes);
        for (int64_t t0 = 0; t0 < a.n_rows; t0 += group) {
            const int64_t t1 = std::min(a.n_rows, t0 + group);
            int64_t o = p0;
            for (; o + 4 <= p1; o += 4) lanes_tokens<B, 4>(a, t0, t1, o, pre + (o - p0) * nblk);
            for (; o < p1; ++o) lanes_tokens<B, 1>(a, t0, t1, o, pre + (o - p0) * nblk);
        }
    }
}

}   // namespace

void bf16_round_rows_lanes_avx512(const float* x, int64_t n_rows, int64_t ldx, int64_t in, uint16_t* xq,
                                  float* sums) {
    const __m512i ones = (__m512i)_mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
    alignas(64) uint16_t nat[kElems];
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t k = 0; k < in / kElems; ++k) {
            const float* src = x + t * ldx + k * kElems;
            for (int64_t i = 0; i < kElems; ++i) nat[i] = f32_to_bf16(src[i]);
            for (int64_t j = 0; j < kSub; ++j) {   // X of sub-block j: the rounded values, pairwise then hsum16
                const __m512i v = _mm512_load_si512(nat + 32 * j);
                sums[t * (in / 32) + k * kSub + j] = hsum16(_mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)v, (__m512bh)ones));
            }
            // register v < 4, lane L: values 8v … 8v + 7 of sub-block 2L; v ≥ 4: of sub-block 2L + 1
            uint16_t* dst = xq + t * in + k * kElems;
            for (int v = 0; v < 8; ++v)
                for (int l = 0; l < 4; ++l) std::memcpy(dst + 32 * v + 8 * l, nat + 32 * (2 * l + v / 4) + 8 * (v % 4), 16);
        }
    }
}

bool block_lanes_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (!a.xq) return false;
    static_assert(sizeof(Q4_KLanes) / kElems <= 4, "a panel of prepared rows must fit in the scratch (4 bytes per value)");
    switch (a.w_dtype) {
        case DType::kQ4_K: lanes_range<Q4_KLanes>(a, o_begin, o_end, scratch); return true;
        default: return false;
    }
}

}   // namespace kimi::cpu
