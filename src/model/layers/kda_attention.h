// KDA (Kimi Delta Attention) layer forward. ref: docs/model.md#kda and docs/model.md#k3-kda (K3: lower-bound
// forget gate, full-rank output gate); fla layers/kda.py; vLLM layers/kda.py (projections,
// conv, gate, recurrence, gated norm, o_proj).
#pragma once
#include "model/layers/layer_context.h"
#include "model/model_weights.h"

namespace kimi {

// x: [T, D] (the input_layernorm output) → returns [T, D]: the very tensor o_proj wrote
// (arena-owned; no copy). Reads and updates the KDA state + conv windows of each sequence.
Tensor kda_attention_forward(LayerContext& lc, const KdaWeights& w, int64_t kda_layer, const Tensor& x);

}   // namespace kimi
