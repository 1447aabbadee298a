// ModelConfig: a Kimi Linear (docs/model.md#config) or Kimi-K3 (docs/model.md#k3: text model under
// `text_config`) config.json parsed and validated, plus the derived layer map. Every key the
// architecture needs is required; contradictions (layer lists that do not partition the
// layers, top-k > experts, ...) and options the engine does not implement are errors naming
// the key. Each K3 building block is switched on by its own config key, at load time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "checkpoint/quant_config.h"

namespace kimi {

enum class LayerKind : uint8_t { kKda, kMla };

// The gated activation of every MLP and expert: silu(gate)·up (Kimi Linear) or SiTU (K3,
// docs/model.md#situ): β·tanh(gate/β)·sigmoid(gate) · β_lin·tanh(up/β_lin) (β_lin = 0: plain up).
enum class ActKind : uint8_t { kSilu, kSitu };
struct Activation {
    ActKind kind = ActKind::kSilu;
    float beta = 1.0f, linear_beta = 0.0f;
};

// Kimi-K3's vision tower (MoonViT) and patch-merger projector: the top-level `vision_config`
// and `media_placeholder_token_id` (docs/vision.md#config). Absent keys take the published
// values; any other tower kind (LayerNorm towers, other projectors, biases) is an error.
struct VisionConfig {
    bool present = false;   // the config has a vision_config the engine runs
    // A vision_config the engine cannot run (a value it does not implement): why. The text model
    // loads all the same; images are refused with this reason.
    std::string unsupported;
    int64_t patch_size = 14;
    int64_t hidden = 1024;                    // vt_hidden_size D
    int64_t n_layers = 27;                    // vt_num_hidden_layers
    int64_t n_heads = 12;                     // vt_num_attention_heads
    int64_t qkv_dim = 1536;                   // qkv_hidden_size (heads · head_dim)
    int64_t intermediate = 4096;              // vt_intermediate_size
    int64_t pos_emb_h = 64, pos_emb_w = 64;   // init_pos_emb_height / width
    int64_t merge = 2;                        // merge_kernel_size [2, 2]
    int64_t text_hidden = 0;                  // text_hidden_size (= the text model's hidden size)
    float projector_eps = 1e-5f;              // projector_ln_eps
    // why: the tower's RMSNorms are constructed without an eps, so torch uses the machine
    // epsilon of the dtype the model runs in (bf16: 2^-7); kept in every precision.
    float norm_eps = 0.0078125f;
    int32_t media_pad_id = -1;   // media_placeholder_token_id (the <|media_pad|> rows)

    int64_t head_dim() const { return qkv_dim / n_heads; }
    int64_t patch_dim() const { return 3 * patch_size * patch_size; }   // 588
    int64_t merged_dim() const { return hidden * merge * merge; }       // the projector's input 4D
};

struct ModelConfig {
    std::string architecture;    // "KimiLinearForCausalLM" or "KimiK3ForConditionalGeneration"
    std::string tensor_prefix;   // "" (Kimi Linear) or "language_model." (K3: the text model's tensors)
    int64_t vocab_size = 0, hidden_size = 0, n_layers = 0, intermediate_size = 0;
    float rms_norm_eps = 1e-5f;
    bool tie_word_embeddings = false;
    int32_t bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;
    int64_t max_position_embeddings = 0;   // model_max_length when given
    Activation act;                        // hidden_act (+ activation_situ_*)

    // KDA (linear_attn_config)
    int64_t kda_heads = 0, kda_head_dim = 0, conv_kernel = 0;
    bool kda_full_rank_gate = false;    // use_full_rank_gate: g_proj instead of g_a/g_b
    bool kda_has_lower_bound = false;   // gate_lower_bound given: g = lb·sigmoid(e^A (f + dt_bias))
    float kda_gate_lower_bound = 0.0f;
    // MLA
    int64_t mla_heads = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0, kv_lora_rank = 0;
    int64_t q_lora_rank = 0;        // 0: plain q_proj; else q_a_proj → q_a_layernorm → q_b_proj
    bool mla_output_gate = false;   // mla_use_output_gate: o ⊙ sigmoid(g_proj(x)) before o_proj
    // MoE
    int64_t n_experts = 0, n_experts_per_token = 0, n_shared_experts = 0, moe_intermediate_size = 0;
    int64_t first_k_dense_replace = 0, moe_layer_freq = 1, n_expert_groups = 1, topk_groups = 1;
    bool moe_renormalize = true;
    float routed_scaling_factor = 1.0f;
    int64_t moe_latent_dim = 0;     // routed_expert_hidden_size: experts run on a latent (0: on D)
    bool moe_latent_norm = false;   // latent_moe_use_norm: RMSNorm on the routed sum
    // Block Attention Residuals (docs/model.md#attnres): 0 = plain residual stream
    int64_t attn_res_block_size = 0;

    std::vector<LayerKind> layer_kinds;   // [L], from the 1-based kda_layers / full_attn_layers
    QuantConfig quant;                    // quantization_config (top level or in text_config): MXFP4 linears
    VisionConfig vision;                  // K3: the vision tower (present = false: text only)

    bool is_moe_layer(int64_t i) const { return i >= first_k_dense_replace && i % moe_layer_freq == 0; }
    int64_t n_kda_layers() const;
    int64_t n_mla_layers() const;
    int64_t mla_qk_dim() const { return qk_nope_dim + qk_rope_dim; }
    int64_t mla_latent_width() const { return kv_lora_rank + qk_rope_dim; }   // cached per token
    int64_t moe_expert_in_dim() const { return moe_latent_dim > 0 ? moe_latent_dim : hidden_size; }
    int64_t attn_res_n_blocks() const {
        return attn_res_block_size > 0 ? (n_layers + attn_res_block_size - 1) / attn_res_block_size : 0;
    }
    bool is_k3_layout() const { return !tensor_prefix.empty(); }
};

// Parses and validates; `source` names the file in error messages. Throws kimi::Error.
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);
ModelConfig load_model_config(const std::string& model_dir);
// The top-level vision_config of a K3 config (present = false when it has none).
VisionConfig parse_vision_config(const nlohmann::json& top, const std::string& source, int64_t text_hidden,
                                 int64_t vocab_size);

}   // namespace kimi
