// The public ops, one per entry of the op table (backend/op_table.h, where each op's contract
// and shapes are documented): the model calls these. Each checks its contract (ops.cpp; a
// violation aborts with file:line), then runs its CPU kernel (backend/cpu); the scalar
// references (backend/ref) are the op tests' oracle.
#pragma once
#include "backend/op_table.h"

namespace kimi::ops {

KIMI_OPS(KIMI_OP_DECLARE)

}   // namespace kimi::ops
