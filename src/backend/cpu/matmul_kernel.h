// The matrix-product micro-kernel interface shared by the scalar and ISA-specific versions.
// A kernel computes y[t, o] = Σ_i x[t, i] · w[o, i] for rows t < n_rows and o in [o_begin, o_end).
// Weights: F32, BF16, F16, or MXFP4 (E2M1 values × E8M0 group scales, decoded exactly); the
// GGUF block types go through block_quant_range (decoded to f32 rows, then the F32 kernel).
// Per output element the reduction order is fixed by the kernel the process picked at
// start-up (matmul_isa() and use_amx(): the tile order below) and the product's (activation, weight) types: the scalar and AVX2
// kernels sum 8 lane partial sums over i ≡ lane (mod 8) for i < I - I % 8, reduce the lanes
// pairwise in a fixed order, then add the tail i in order; the AVX-512 BF16 kernels (bf16
// activations) take bf16 weights in the lane order below (kernels/matmul_outer_avx512.cpp),
// and MXFP4 weights in the 16-lane dot order (kernels/matmul_avx512.cpp: lane l sums pair l of
// each 32 columns, then the lanes upper half onto lower, twice, then pairwise) on the weights
// decoded exactly to bf16 (E2M1 × 2^125 from a LUT, the scale 2^(s − 127) applied by a
// saturating subtract on the exponent field; scale bytes outside [2, 252] by a slower exact
// decode) in the span order below. So within a process the result never depends on n_rows,
// the o range, the blocking or the thread.
//
// The span order (AVX-512 BF16 × MXFP4): each full span of 128 columns [128k, 128k + 128)
// holds at position 32n + w the column 4w + n (n < 4, w < 32), i.e. x'[32n + w] = x[4w + n]:
// 64 packed bytes read as 32 words give column 4w + n as nibble n of word w. A trailing
// partial span (I % 128 = 32, 64 or 96) keeps the natural order.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace kimi::cpu {

struct MatmulArgs {
    const float* x;   // n_rows rows, ldx apart
    int64_t n_rows, ldx;
    const void* w;   // [O, I] of w_dtype (kMXFP4: the packed values, [O, I/2] bytes)
    DType w_dtype;
    int64_t in;   // I
    float* y;     // n_rows rows, ldy apart
    int64_t ldy;
    const uint8_t* w_scale = nullptr;   // kMXFP4: [O, I/32] E8M0 scales
    // x rounded to bf16, n_rows rows I apart: given (bf16 activations) only to a kernel that
    // multiplies bf16 pairs natively (AVX-512 BF16), and used only with bf16 weights.
    const uint16_t* xb = nullptr;
    // The same bits in the span order (above), n_rows rows I apart: given instead of xb with
    // MXFP4 weights (bf16_round_rows_spans_avx512), used only with them.
    const uint16_t* xp = nullptr;
    // The same bits in the sub-block lane order of the weight's lane family (lane_family:
    // kernels/quant_lanes_avx512.cpp), n_rows rows I apart, with each row's sub-block sums
    // (I / lane_sub_elems floats a row): given instead of xb with those weights.
    const uint16_t* xq = nullptr;
    const float* xq_sums = nullptr;
    // The same bits as the activation panel of the lane order (pack_token_pairs_avx512): given beside
    // xb with bf16 weights when n_rows > kOuterDirectMaxRows.
    const uint32_t* xv = nullptr;
    // The same bits as the tile panel (pack_amx_panel): given beside xb with bf16 and MXFP4
    // weights when the tiles run the product (use_amx), at every row count.
    const uint16_t* xt = nullptr;
};

// The tile order (AMX-BF16, where use_amx(): the CPU has the tiles, Linux granted them, they passed
// the start-up self-check, and KIMI_ISA does not lower them): bf16 activations × bf16 weights, and
// × MXFP4 weights decoded exactly to bf16 (E2M1 · 2^(scale − 127); denormal results read as zero
// like any bf16 input), at every row count, one token of decode included. Per output y[t, o],
// one f32 chain from +0 over the I elements padded with zeros to a multiple of 32, in order, each
// pair 2k, 2k + 1 as acc += w[2k]·x[2k], then acc += w[2k+1]·x[2k+1]: each an exact product rounded
// once into the sum to nearest even, bf16 inputs that are denormal read as zero, denormal sums
// flushed to zero (TDPBF16PS as amx_tile.h emulates it; the tiles are held to that emulation bit
// for bit before they are used, else the process keeps the vector kernels with a one-line notice).
// The product's plan: weights [O, I] are the A tiles as stored (16 rows × 32 bf16, the row
// pitch apart; the last 32 columns zero-padded in a copy when I % 32 ≠ 0; MXFP4 rows decoded a
// row block at a time into L2), the activations the B tiles of the panel below, C tiles of
// 16 rows × up to 16 tokens, 2 × 2 of them per block (amx_matmul_body.h).
//
// The tile panel: token rows in blocks of 16 (the last one nt ≤ 16 rows), each block
// ⌈I/32⌉ steps × 16 pairs × nt tokens × 2 bf16: element (s, k, t, e) = x[16j + t][32s + 2k + e]
// (zero past I); block j starts at j · ⌈I/32⌉ · 512.
constexpr int64_t amx_panel_elems(int64_t n_rows, int64_t in) { return n_rows * 32 * ((in + 31) / 32); }
void pack_amx_panel(const uint16_t* xb, int64_t n_rows, int64_t in, uint16_t* panel);
bool use_amx();                     // the tile order (above) runs this process's bf16 and MXFP4 products
bool amx_tiles_emulated();          // ... on the emulated tiles (KIMI_ISA=amx-emulated: tests, any machine)
const std::string& amx_why_off();   // why not, in one line ("" where they run)
std::string matmul_units();   // what runs the bf16 products, e.g. "amx-bf16 tiles (tile order)", for logs and JSON
// bf16/MXFP4 weights with MatmulArgs::xt on the tiles (emulated or real); other products on the
// vector kernel of matmul_isa().
void matmul_range_amx(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
void amx_range_emulated(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
void amx_range_hw(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);

// The lane order (AVX-512 BF16 × bf16 weights, kernels/matmul_outer_avx512.cpp): per output
// y[t, o], the steps s = 0 .. ⌊I/16⌋ − 1 of 16 elements feed 8 chains; chain c is an f32 sum
// from +0 over the steps in order, each step acc += x[16s+2c+1]·w[16s+2c+1], then
// acc += x[16s+2c]·w[16s+2c], each rounded to nearest even (bf16 inputs that are denormal read
// as zero, denormal results flushed: one vdpbf16ps lane). Then
// y = ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)), then y += x[i]·w[i] for the tail
// i = 16·⌊I/16⌋ .. I − 1 in order. A vector holds the 8 chains of two outputs: a few token rows
// run it on two weight rows per vector (one shuffle of the rows as stored), more on two tokens
// per vector (the activation panel), and both give the same bits.
//
// The activation panel: token rows in pairs (an odd last row paired with zeros), each pair
// ⌊I/16⌋ × 16 dwords: step s of the first row's elements (16s .. 16s + 15) in dwords 0..7, of the
// second row's in dwords 8..15.
constexpr int64_t kOuterDirectMaxRows = 4;   // token rows up to which the lane order runs direct
constexpr int64_t panel_dwords(int64_t n_rows, int64_t in) { return (n_rows + 1) / 2 * 16 * (in / 16); }
void pack_token_pairs_avx512(const uint16_t* xb, int64_t n_rows, int64_t in, uint32_t* panel);
// bf16 activations (xb, or xv for more than kOuterDirectMaxRows rows) × bf16 weights in the
// pair order. scratch: outer_scratch_floats() floats, 64-byte aligned.
void outer_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
int64_t outer_scratch_floats();

// Byte offset of element e (flat, row-major) of a weight matrix of dtype dt.
constexpr int64_t weight_byte(DType dt, int64_t e) {
    return dt == DType::kMXFP4 ? e / 2 : dt == DType::kF32 ? e * 4 : e * 2;
}

// Whether the kernel of this process multiplies bf16 activation bits with these weights
// natively (AVX-512 BF16: bf16 weights as stored, MXFP4 decoded to bf16 in registers; these
// take MatmulArgs::xb, or xp for MXFP4).
bool kernel_takes_bf16_bits(DType w_dtype);

// Widens weight row `row` (I elements) of any weight dtype to f32, exactly.
void widen_row_portable(const MatmulArgs& a, int64_t row, float* out);

// The unit of work the callers split a product's output columns into: a multiple of the
// kernels' 8-, 4- and 3-row blocks, small enough to balance 2-16 threads on narrow products.
constexpr int64_t kMatmulColumnBlock = 24;

// The most weight rows a kernel blocks together.
constexpr int64_t kMaxRowBlock = 48;

// Floats of per-thread scratch a kernel needs for products with I = in: partial sums of
// 16 token rows × kMaxRowBlock rows × 16 lanes, then kMaxRowBlock widened rows (f32; the
// MXFP4 rows decoded to bf16 for bf16 activations, with their scale words, take about half).
constexpr int64_t matmul_scratch_floats(int64_t in) { return 16 * kMaxRowBlock * 16 + kMaxRowBlock * in; }

// scratch: matmul_scratch_floats(I) floats, 64-byte aligned, private to the calling thread.
void matmul_range_scalar(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
void matmul_range_avx2(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
void matmul_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);

using MatmulKernel = void (*)(const MatmulArgs&, int64_t, int64_t, float*);

// Rounds n_rows rows of x (ldx apart) to bf16 (f32_to_bf16: nearest even, NaN kept quiet),
// writing them I apart as f32 values into xr and/or as bf16 bits into xb (either may be null).
// The same integer arithmetic in both builds (the AVX-512 one vectorized by the compiler), so
// the same bits.
void bf16_round_rows_portable(const float* x, int64_t n_rows, int64_t ldx, int64_t in, float* xr, uint16_t* xb);
void bf16_round_rows_avx512(const float* x, int64_t n_rows, int64_t ldx, int64_t in, float* xr, uint16_t* xb);
// The same bf16 bits, written I apart in the span order (for MatmulArgs::xp).
void bf16_round_rows_spans_avx512(const float* x, int64_t n_rows, int64_t ldx, int64_t in, uint16_t* xp);

// static: compiled into the portable and the AVX-512 TU, each keeps its own copy (no ODR merge).
static inline void bf16_round_rows_body(const float* __restrict x, int64_t n_rows, int64_t ldx, int64_t in,
                                        float* __restrict xr, uint16_t* __restrict xb) {
    for (int64_t t = 0; t < n_rows; ++t) {
        const float* __restrict row = x + t * ldx;
        if (xb)
            for (int64_t i = 0; i < in; ++i) xb[t * in + i] = f32_to_bf16(row[i]);
        if (xr)
            for (int64_t i = 0; i < in; ++i) xr[t * in + i] = bf16_to_f32(f32_to_bf16(row[i]));
    }
}
MatmulKernel vector_kernel();   // the vector (or scalar) kernel of matmul_isa()
MatmulKernel matmul_kernel();   // matmul_range_amx where use_amx(), else vector_kernel()

// A GGUF block-type weight (is_block_quant): the factored bf16 product when xb is given, else
// rows decoded exactly to f32 into scratch (which must hold matmul_scratch_floats(I) +
// kMatmulColumnBlock · I floats) that `kernel` runs as F32 weights (matmul.cpp).
void block_quant_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch, MatmulKernel kernel);
// The same values as dequantize_blocks (core/quant_blocks.h), 16 per instruction, for the common
// types (kernels/quant_avx512.cpp); false for a type it does not vectorize.
bool dequantize_blocks_avx512(DType t, const void* src, float* dst, int64_t n);
// bf16 activations (MatmulArgs::xb) × Q2_K, Q3_K, Q5_K, Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS or MXFP4
// weights on AVX-512 BF16: the factored
// product (codes as bf16 through vdpbf16ps, each sub-block's scale and min applied to its partial
// sums; kernels/quant_avx512.cpp), at every row count; false for another type.
// scratch: 64-byte aligned, kMatmulColumnBlock · I floats (the prepared blocks of a panel of rows).
bool block_bf16_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
// The same product in a sub-block lane order (kernels/quant_lanes_avx512.cpp) for the types of a
// lane family: 0 = Q4_K (8 sub-blocks of 32), 1 = Q6_K (16 of 16). bf16 activations given as
// MatmulArgs::xq / xq_sums (bf16_round_rows_lanes_avx512 of the weight's family, I/32 or I/16
// sums a row); false for another type or without xq. scratch: 64-byte aligned,
// kMatmulColumnBlock · I floats (the prepared blocks of a panel of rows).
bool block_lanes_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch);
void bf16_round_rows_lanes_avx512(int family, const float* x, int64_t n_rows, int64_t ldx, int64_t in, uint16_t* xq,
                                  float* sums);
constexpr int kLaneFamilies = 2;
constexpr int lane_family(DType t) { return t == DType::kQ4_K ? 0 : t == DType::kQ6_K ? 1 : -1; }
constexpr int64_t lane_sub_elems(int family) { return family == 0 ? 32 : 16; }
// The block types block_bf16_range_avx512 multiplies.
constexpr bool block_type_takes_bf16(DType t) {
    return t == DType::kQ2_K || t == DType::kQ3_K || t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K ||
        t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ5_0 || t == DType::kIQ4_XS || t == DType::kIQ4_NL ||
        t == DType::kMXFP4_GGML;
}

}   // namespace kimi::cpu
