// NoPE MLA layer forward, weight-absorbed, over the paged latent cache.
// ref: docs/model.md#mla, docs/model.md#mla-absorbed and docs/model.md#k3-mla (K3: q-LoRA, sigmoid output gate); vLLM kimi_linear.py
// KimiMLAAttention + MLA backend.
#pragma once
#include "model/layers/layer_context.h"
#include "model/model_weights.h"

namespace kimi {

// x: [T, D] → returns [T, D]: the very tensor o_proj wrote (arena-owned; no copy). Writes
// the step's latents into the cache before attending (each token sees itself).
Tensor mla_attention_forward(LayerContext& lc, const MlaWeights& w, int64_t mla_layer, const Tensor& x);

}   // namespace kimi
