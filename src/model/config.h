// ModelConfig: the Kimi Linear config.json (model-spec §1) parsed and validated, plus the
// derived layer map. Every key the architecture needs is required; contradictions (layer
// lists that do not partition the layers, top-k > experts, ...) are errors naming the key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kimi {

enum class LayerKind : uint8_t { kKda, kMla };

struct ModelConfig {
    std::string architecture;      // "KimiLinearForCausalLM"
    int64_t vocab_size = 0, hidden_size = 0, n_layers = 0, intermediate_size = 0;
    float rms_norm_eps = 1e-5f;
    bool tie_word_embeddings = false;
    int32_t bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;
    int64_t max_position_embeddings = 0;     // model_max_length when given

    // KDA (linear_attn_config)
    int64_t kda_heads = 0, kda_head_dim = 0, conv_kernel = 0;
    // MLA
    int64_t mla_heads = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0, kv_lora_rank = 0;
    // MoE
    int64_t n_experts = 0, n_experts_per_token = 0, n_shared_experts = 0, moe_intermediate_size = 0;
    int64_t first_k_dense_replace = 0, moe_layer_freq = 1, n_expert_groups = 1, topk_groups = 1;
    bool moe_renormalize = true;
    float routed_scaling_factor = 1.0f;

    std::vector<LayerKind> layer_kinds;      // [L], from the 1-based kda_layers / full_attn_layers

    bool is_moe_layer(int64_t i) const { return i >= first_k_dense_replace && i % moe_layer_freq == 0; }
    int64_t n_kda_layers() const;
    int64_t n_mla_layers() const;
    int64_t mla_qk_dim() const { return qk_nope_dim + qk_rope_dim; }
    int64_t mla_latent_width() const { return kv_lora_rank + qk_rope_dim; }   // cached per token
};

// Parses and validates; `source` names the file in error messages. Throws kimi::Error.
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);
ModelConfig load_model_config(const std::string& model_dir);

}  // namespace kimi
