// CPU kernels, one per op of the op table (backend/op_table.h: same names, parameters and
// contracts; the contracts are checked in ops/ops.cpp before these run).
#pragma once
#include "backend/op_table.h"

namespace kimi::cpu {

using ops::PagedLatents;
using ops::RouteParams;
using ops::SeqLayout;
using ops::SlotState;
using ops::StateCapture;

KIMI_OPS(KIMI_OP_DECLARE)

// Dot product with the fixed 8-lane reduction order of the matmul kernels (plain C++).
float dot_f32(const float* a, const float* b, int64_t n);

// attention_scores on AVX-512 BF16 (kernels/attn_avx512.cpp): k BF16, x rounded to bf16.
void attention_scores_avx512_bf16(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& k, float* s,
                                  int64_t lds);
// attention_values on AVX-512 BF16: v BF16, p rounded to bf16.
void attention_values_avx512_bf16(Exec& ex, const float* p, int64_t n_rows, int64_t ldp, const Tensor& v, float* o,
                                  int64_t ldo);

}   // namespace kimi::cpu
