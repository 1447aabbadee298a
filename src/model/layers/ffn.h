// Feed-forward blocks: the dense gated MLP (SiLU or SiTU) and the DeepSeek-V3-style MoE with
// shared experts, optionally latent (K3: routed experts on a down-projected latent).
// ref: docs/model.md#moe, docs/model.md#situ, docs/model.md#latent-moe; vLLM kimi_linear.py KimiMoE / KimiMLP, K3 KimiSparseMoeBlock.
#pragma once
#include "dist/comm.h"
#include "model/model_weights.h"
#include "ops/ops.h"

namespace kimi {

// x: [T, D] → [T, D]: down(act(gate(x), up(x))), arena-owned.
Tensor mlp_forward(Exec& ex, const Activation& act, const MlpWeights& w, const Tensor& x);

// x: [T, D] → [T, D]: Σ_a weight[t,a] · expert_{id[t,a]}(x[t]) + shared(x[t]); with a latent,
// up(norm(Σ_a weight[t,a] · expert_{id[t,a]}(down(x[t])))) + shared(x[t]). Tokens are
// grouped by expert (only selected experts' weights are read); every token's result is
// combined in its own selection order, so it does not depend on the other tokens.
// comm (tensor/expert parallel; null in one process): this rank holds a part of every expert
// (or some whole experts) and of the shared experts; the partial sums are added across ranks
// before the latent norm (K3) and at the end, so the result is the whole block's on every rank.
Tensor moe_forward(Exec& ex, const ModelConfig& c, const MoeWeights& w, const Tensor& x, dist::Comm* comm = nullptr);

}   // namespace kimi
