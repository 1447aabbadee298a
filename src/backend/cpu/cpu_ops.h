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

}   // namespace kimi::cpu
