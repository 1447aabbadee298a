// The attention output contract in one place (docs/development.md#attention-output): each attention
// module ends in attn_o_proj, whose output tensor is what the module returns; the decoder adds
// residual_addend(...) of it into the residual. Direct mode: that very tensor. Copy mode, the
// A/B baseline of engines whose attention writes a caller-provided buffer: a counted copy.
// Both record the pointer they hand on in ex.trace, which is how the ownership tests see it.
#pragma once
#include "backend/exec.h"
#include "core/tensor.h"

namespace kimi {

// o: [T, H*V], w_o: [D, H*V] → [T, D] from the step arena; the attention's return value.
Tensor attn_o_proj(Exec& ex, const Tensor& o, const Tensor& w_o);

// What the decoder adds into the residual for the attention output `attn` [T, D].
Tensor residual_addend(Exec& ex, const Tensor& attn);

}   // namespace kimi
