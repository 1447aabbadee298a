// Scalar reference of every op of the op table (backend/op_table.h: same names, parameters and
// contracts; the Exec is not used): plain loops, double accumulation, no threads, no blocking
// — obviously correct, and the oracle the op tests compare the kernels against.
#pragma once
#include "backend/op_table.h"

namespace kimi::ref {

using ops::PagedLatents;
using ops::RouteParams;
using ops::SeqLayout;
using ops::SlotState;
using ops::StateCapture;

KIMI_OPS(KIMI_OP_DECLARE)

}   // namespace kimi::ref
