// GGUF metadata → config.json (see gguf_config.h). Key names: llama.cpp gguf-py constants.py
// (Keys.LLM, Keys.Attention, Keys.SSM, Keys.KDA); docs/gguf.md#config lists the mapping.
#include "model/gguf_config.h"

#include <string>

#include "core/error.h"

namespace kimi {

namespace {

using nlohmann::json;

// The tensor `name` of the model, or nullptr.
const GgufTensorInfo* tensor(const GgufModel& g, const std::string& name) {
    auto it = g.tensors().find(name);
    return it == g.tensors().end() ? nullptr : it->second.info;
}

bool any_layer_has(const GgufModel& g, int64_t n_layers, const std::string& suffix) {
    for (int64_t l = 0; l < n_layers; ++l)
        if (tensor(g, "blk." + std::to_string(l) + "." + suffix)) return true;
    return false;
}

// hidden_act: SiTU where the file gives its beta, silu otherwise.
void activation_keys(const GgufFile& f, const std::string& a, json& t) {
    if (f.has(a + "activation.situ_beta")) {
        t["hidden_act"] = "situ";
        t["activation_situ_beta"] = f.get_float(a + "activation.situ_beta");
        if (f.has(a + "activation.situ_linear_beta"))
            t["activation_situ_linear_beta"] = f.get_float(a + "activation.situ_linear_beta");
    } else {
        t["hidden_act"] = "silu";
    }
}

// KDA: llama.cpp marks its layers by a KV head count of 0; GGUF has no KDA head count of
// its own (the converter assumes num_attention_heads), so it is read from b_proj's rows.
json kda_config(const GgufModel& g, const std::string& a, int64_t n_layers) {
    const GgufFile& f = g.first();
    const std::vector<int64_t> kv = f.get_int_array(a + "attention.head_count_kv");
    if (int64_t(kv.size()) != n_layers)
        throw Error(f.path() + ": " + a + "attention.head_count_kv has " + std::to_string(kv.size()) + " entries for " +
                    std::to_string(n_layers) + " layers (one per layer: 0 for KDA)");
    json kda_layers = json::array(), full_layers = json::array();
    int64_t kda_heads = 0;
    for (int64_t l = 0; l < n_layers; ++l) {
        if (kv[size_t(l)] != 0) {
            full_layers.push_back(l + 1);
            continue;
        }
        kda_layers.push_back(l + 1);
        const GgufTensorInfo* beta = tensor(g, "blk." + std::to_string(l) + ".ssm_beta.weight");
        if (!beta || beta->ne.size() != 2)
            throw Error(f.path() + ": KDA layer " + std::to_string(l) + " has no 2-D tensor 'blk." + std::to_string(l) +
                        ".ssm_beta.weight' (GGUF carries the KDA head count only in its shape)");
        if (kda_heads != 0 && beta->ne[1] != kda_heads)
            throw Error(f.path() + ": 'blk." + std::to_string(l) + ".ssm_beta.weight' gives " +
                        std::to_string(beta->ne[1]) + " KDA heads, an earlier layer " + std::to_string(kda_heads));
        kda_heads = beta->ne[1];
    }
    json lac;
    lac["num_heads"] = kda_heads > 0 ? kda_heads : f.get_int(a + "attention.head_count");
    lac["head_dim"] = f.get_int(a + "kda.head_dim");
    lac["short_conv_kernel_size"] = f.get_int(a + "ssm.conv_kernel");
    lac["use_full_rank_gate"] = any_layer_has(g, n_layers, "ssm_g.weight");
    if (f.has(a + "kda.gate_lower_bound")) lac["gate_lower_bound"] = f.get_float(a + "kda.gate_lower_bound");
    lac["kda_layers"] = kda_layers;
    lac["full_attn_layers"] = full_layers;
    return lac;
}

}   // namespace

json gguf_model_config_json(const GgufModel& g) {
    const GgufFile& f = g.first();
    const std::string arch = f.get_string("general.architecture");
    if (arch != "kimi-linear" && arch != "kimi-k3")
        throw Error(f.path() + ": general.architecture '" + arch +
                    "' is not a Kimi model (kimi.cpp reads kimi-linear and kimi-k3)");
    const bool k3 = arch == "kimi-k3";
    const std::string a = arch + ".";
    const auto i = [&](const std::string& key) { return f.get_int(a + key); };
    const auto i_or = [&](const std::string& key, int64_t fallback) { return f.has(a + key) ? i(key) : fallback; };

    json t;   // the text model's keys
    const int64_t n_layers = i("block_count");
    t["num_hidden_layers"] = n_layers;
    t["hidden_size"] = i("embedding_length");
    t["intermediate_size"] = i("feed_forward_length");
    t["vocab_size"] =
        f.has(a + "vocab_size") ? i("vocab_size") : int64_t(f.get_string_array("tokenizer.ggml.tokens").size());
    t["rms_norm_eps"] = f.get_float(a + "attention.layer_norm_rms_epsilon");
    t["tie_word_embeddings"] = tensor(g, "output.weight") == nullptr;
    if (f.has(a + "context_length")) t["max_position_embeddings"] = i("context_length");
    for (const char* id : {"bos", "eos"})
        if (f.has(std::string("tokenizer.ggml.") + id + "_token_id"))
            t[std::string(id) + "_token_id"] = f.get_int(std::string("tokenizer.ggml.") + id + "_token_id");
    if (f.has("tokenizer.ggml.padding_token_id")) t["pad_token_id"] = f.get_int("tokenizer.ggml.padding_token_id");
    activation_keys(f, a, t);

    // MLA (served by llama.cpp as MQA over the latent: key_length = kv_lora_rank + rope dims)
    t["num_attention_heads"] = i("attention.head_count");
    t["num_key_value_heads"] = i("attention.head_count");
    if (f.has(a + "attention.q_lora_rank")) t["q_lora_rank"] = i("attention.q_lora_rank");
    t["kv_lora_rank"] = i("attention.kv_lora_rank");
    const int64_t rope = i_or("rope.dimension_count", 0);
    t["qk_rope_head_dim"] = rope;
    t["qk_nope_head_dim"] = i("attention.key_length_mla") - rope;
    t["v_head_dim"] = i("attention.value_length_mla");
    t["mla_use_nope"] = true;
    t["mla_use_output_gate"] = any_layer_has(g, n_layers, "attn_gate.weight");

    t["linear_attn_config"] = kda_config(g, a, n_layers);

    // MoE
    const int64_t gating = i_or("expert_gating_func", 2);
    if (gating != 2)
        throw Error(f.path() + ": " + a + "expert_gating_func = " + std::to_string(gating) +
                    "; Kimi routers are sigmoid (2)");
    t["moe_router_activation_func"] = "sigmoid";
    t["num_experts"] = i("expert_count");
    t["num_experts_per_token"] = i("expert_used_count");
    t["num_shared_experts"] = i_or("expert_shared_count", 0);
    t["moe_intermediate_size"] = i("expert_feed_forward_length");
    t["first_k_dense_replace"] = i_or("leading_dense_block_count", 0);
    t["routed_scaling_factor"] = f.has(a + "expert_weights_scale") ? f.get_float(a + "expert_weights_scale") : 1.0;
    // Kimi Linear's published config renormalizes; kimi_linear.py writes no key for it
    t["moe_renormalize"] = f.has(a + "expert_weights_norm") ? f.get_bool(a + "expert_weights_norm") : true;
    t["use_grouped_topk"] = true;
    t["num_expert_group"] = i_or("expert_group_count", 1);
    t["topk_group"] = i_or("expert_group_used_count", 1);
    if (f.has(a + "expert_latent_length")) {
        t["routed_expert_hidden_size"] = i("expert_latent_length");
        t["latent_moe_use_norm"] = any_layer_has(g, n_layers, "ffn_routed_norm.weight");
    }
    if (f.has(a + "attn_res.block_size")) t["attn_res_block_size"] = i("attn_res.block_size");
    t["num_nextn_predict_layers"] = i_or("nextn_predict_layers", 0);

    if (!k3) {
        t["architectures"] = json::array({"KimiLinearForCausalLM"});
        return t;
    }
    json top;   // K3 nests the text model under text_config; a GGUF holds no vision tower
    top["architectures"] = json::array({"KimiK3ForConditionalGeneration"});
    top["text_config"] = t;
    return top;
}

}   // namespace kimi
