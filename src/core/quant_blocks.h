// Exact decoding of GGUF's (ggml's) block-quantized weight formats to f32: each value comes
// out as the same float ggml's own dequantize_row_* gives (f16 scales widened exactly, the
// same f32 operations in the same order), so a product over the decoded rows multiplies the
// weights the file encodes. The codebook types (IQ2/IQ3/IQ1, TQ) read ggml's grids
// (quant_grids.inc).
// ref: docs/gguf.md#types; llama.cpp ggml/src/ggml-quants.c dequantize_row_*, gguf-py quants.py.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace kimi {

// Decodes n values of block type t (is_block_quant(t); n a multiple of dtype_block(t).elems)
// from src, which starts at a block boundary, into dst.
void dequantize_blocks(DType t, const void* src, float* dst, int64_t n);

// Value e (flat, row-major) of a block-type matrix whose rows hold `row_elems` values each:
// decodes the block that holds it (load-time checks and tests, not products).
float block_element(DType t, const void* data, int64_t row_elems, int64_t e);

// ggml's 16-entry codebooks of IQ4_NL / IQ4_XS and of MXFP4 (doubled E2M1 values), and MXFP4's
// halved E8M0 scale 2^(e - 128): for the vectorized decoders (backend/cpu/kernels).
const int8_t (&kvalues_iq4nl_table())[16];
const int8_t (&kvalues_mxfp4_table())[16];
float e8m0_half(uint8_t e);
// Q4_K / Q5_K sub-block j's scale and min (get_scale_min_k4 of the 12 scale bytes) times the
// block's d and dmin: dj = d · sc, mj = dmin · mn. `static inline`: the AVX-512 kernels call
// it in their inner loops (an out-of-line call there spills every vector register), and each
// translation unit keeps its own copy (see core/dtype.h).
static inline void k_scale_min(int j, const uint8_t* q, float d, float dmin, float& dj, float& mj) {
    uint8_t sc, mn;
    if (j < 4) {
        sc = q[j] & 63;
        mn = q[j + 4] & 63;
    } else {
        sc = uint8_t((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        mn = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
    dj = d * float(sc);
    mj = dmin * float(mn);
}

}   // namespace kimi
