// Feed-forward blocks: the dense SwiGLU MLP and the DeepSeek-V3-style MoE with shared
// experts. ref: model-spec §5; vLLM kimi_linear.py KimiMoE / KimiMLP.
#pragma once
#include "model/model_weights.h"
#include "ops/ops.h"

namespace kimi {

// x: [T, D] → [T, D]: down(silu(gate(x)) * up(x)), arena-owned.
Tensor mlp_forward(Exec& ex, const MlpWeights& w, const Tensor& x);
void mlp_forward_into(Exec& ex, const MlpWeights& w, const Tensor& x, Tensor& y);   // y: [T, D]

// x: [T, D] → [T, D]: Σ_a weight[t,a] · expert_{id[t,a]}(x[t]) + shared(x[t]). Tokens are
// grouped by expert (only selected experts' weights are read); every token's result is
// combined in its own selection order, so it does not depend on the other tokens.
Tensor moe_forward(Exec& ex, const ModelConfig& c, const MoeWeights& w, const Tensor& x);

}  // namespace kimi
