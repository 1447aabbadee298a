// The Kimi Linear / Kimi-K3 weights as plain structs of Tensors (views into the mapped
// checkpoint, or load-time prepared buffers owned by the WeightStore). Names and shapes:
// docs/model.md#weights and docs/model.md#k3. A K3-only block is present exactly when its config key enables it
// (an undefined Tensor otherwise), so a layer's weights say which building blocks it runs.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "dist/comm.h"
#include "model/config.h"
#include "checkpoint/weight_shard.h"
#include "checkpoint/weight_store.h"
#include "model/vision/vision_weights.h"

namespace kimi {

struct KdaWeights {
    Tensor q_proj, k_proj, v_proj;   // [H*K, D]
    Tensor q_conv, k_conv, v_conv;   // [H*K, 1, W] f32 (prepared)
    Tensor f_a, f_b;                 // [K, D], [H*K, K]   forget gate (low rank)
    Tensor dt_bias;                  // [H*K] f32 (prepared)
    Tensor neg_exp_a;                // [H] f32 = -exp(A_log) (prepared)
    Tensor b_proj;                   // [H, D]
    Tensor g_a, g_b;                 // [K, D], [H*V, K]   output gate (low rank, Kimi Linear)
    Tensor g_proj;                   // [H*V, D]           output gate (full rank, K3)
    Tensor o_norm;                   // [V] f32 (prepared)
    Tensor o_proj;                   // [D, H*V]
};

struct MlaWeights {
    Tensor q_proj;               // [H*(N+P), D]       (plain query, Kimi Linear)
    Tensor q_a, q_a_norm, q_b;   // [Q, D], [Q] f32, [H*(N+P), Q]  (q-LoRA, K3)
    Tensor g_proj;               // [H*V, D] sigmoid output gate before o_proj (K3)
    Tensor kv_a_c, kv_a_rope;    // [R, D], [P, D]: row views of kv_a_proj_with_mqa
    Tensor kv_a_norm;            // [R] f32 (prepared)
    Tensor w_uk_t;               // [H, R, N]: k_nope rows of kv_b_proj, transposed per head (prepared)
    Tensor w_uv;                 // [H, V, R]: v rows of kv_b_proj, per head (a view)
    Tensor o_proj;               // [D, H*V]
};

struct MlpWeights {
    Tensor gate, up;   // [F, D]
    Tensor down;       // [D, F]
};

struct MoeWeights {
    Tensor router;       // [E, D] (router logits are always computed in f32)
    Tensor score_bias;   // [E] f32 (prepared e_score_correction_bias)
    std::vector<MlpWeights>
        experts;         // E experts (w1 = gate, w3 = up, w2 = down); expert parallel: undefined if not this rank's
    MlpWeights shared;   // intermediate = moe_intermediate_size × n_shared
    bool has_shared = false;
    // Latent MoE (K3): experts run on x·latent_downᵀ; their sum → latent_norm → latent_up.
    Tensor latent_down;   // [Lat, D]
    Tensor latent_norm;   // [Lat] f32 (prepared; undefined without latent_moe_use_norm)
    Tensor latent_up;     // [D, Lat]
};

struct LayerWeights {
    LayerKind kind = LayerKind::kKda;
    int64_t cache_index = 0;                // index among the KDA (or MLA) layers
    Tensor attn_norm, ffn_norm;             // [D] f32 (prepared)
    Tensor attn_res_score, ffn_res_score;   // [D] f32 = *_res_norm ⊙ *_res_proj (prepared; AttnRes only)
    KdaWeights kda;
    MlaWeights mla;
    bool is_moe = false;
    MlpWeights mlp;
    MoeWeights moe;
};

struct ModelWeights {
    dist::Range vocab;         // this rank's vocabulary rows (all of them in one process)
    Tensor embed;              // [vocab, D]
    Tensor final_norm;         // [D] f32 (prepared)
    Tensor lm_head;            // [vocab, D] (embed when tied)
    Tensor output_res_score;   // [D] f32 (prepared; AttnRes only)
    std::vector<LayerWeights> layers;
    std::optional<VisionWeights> vision;   // K3 with its vision tower in the checkpoint
    // Per tensor-layout row (TensorLayout(config).rows(), in order): what this rank keeps of it,
    // in the form kept (an MXFP4 linear packed, a norm widened to f32, its slice when split);
    // undefined when it keeps nothing of its own (another rank's expert, an AttnRes projection
    // folded into its norm's score vector, a vision tower the checkpoint lacks).
    std::vector<Tensor> held;
};

// Checks every tensor the config implies (presence, float dtype, exact shape), rejects
// tensors the architecture does not use, and performs all load-time preparation.
// progress (optional) is called after each layer with (bytes checked, bytes in the checkpoint).
using LoadProgress = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;
// With a split Shard: only this rank's slices are kept (see weight_shard.h), every tensor is
// still checked.
ModelWeights bind_weights(const ModelConfig& c, WeightStore& store, const LoadProgress& progress = {},
                          const Shard& shard = {});

}   // namespace kimi
