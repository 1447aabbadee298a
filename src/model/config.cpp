// config.json → ModelConfig with validation (docs/model.md#config; keys as Kimi names them, not
// the DeepSeek names).
#include "model/config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"
#include "model/config_reader.h"
#include "model/gguf_config.h"

namespace kimi {

namespace {

using nlohmann::json;

constexpr int64_t kMaxDim = int64_t(1) << 24;

}   // namespace

int64_t ModelConfig::n_kda_layers() const {
    int64_t n = 0;
    for (auto k : layer_kinds) n += k == LayerKind::kKda;
    return n;
}
int64_t ModelConfig::n_mla_layers() const { return int64_t(layer_kinds.size()) - n_kda_layers(); }

namespace {

// The quantization_config, at the top level or (K3) inside text_config; null or absent: none.
const json* find_quantization(const json& obj) {
    auto it = obj.find("quantization_config");
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// hidden_act: silu, or SiTU with its beta (and the optional linear beta of the up branch).
void read_activation(const ConfigReader& r, ModelConfig& c) {
    const json& j = r.j;
    const std::string act = r.string_or("hidden_act", "silu");
    if (act == "silu") {
        c.act.kind = ActKind::kSilu;
    } else if (act == "situ") {
        c.act.kind = ActKind::kSitu;
        c.act.beta = float(r.number("activation_situ_beta", 1e-6, 1e6));
        // why: null or absent leaves the up branch untransformed, as the reference modeling code does
        auto lb = j.find("activation_situ_linear_beta");
        c.act.linear_beta =
            (lb == j.end() || lb->is_null()) ? 0.0f : float(r.number("activation_situ_linear_beta", 1e-6, 1e6));
    } else {
        r.fail("hidden_act", "= \"" + act + "\" is not supported (silu or situ)");
    }
}

// MLA: the full-attention layers (no RoPE; one latent shared by all heads).
void read_mla(const ConfigReader& r, ModelConfig& c) {
    c.mla_heads = r.integer("num_attention_heads", 1, 4096);
    // note: num_key_value_heads is not used — MLA shares one latent across all heads.
    c.q_lora_rank = r.integer_or("q_lora_rank", 0, 1, kMaxDim);
    c.mla_output_gate = r.boolean_or("mla_use_output_gate", false);
    c.kv_lora_rank = r.integer("kv_lora_rank", 1, kMaxDim);
    c.qk_nope_dim = r.integer("qk_nope_head_dim", 1, kMaxDim);
    c.qk_rope_dim = r.integer("qk_rope_head_dim", 0, kMaxDim);
    c.v_head_dim = r.integer("v_head_dim", 1, kMaxDim);
    if (c.v_head_dim > c.kv_lora_rank + c.qk_rope_dim)
        r.fail("v_head_dim", "must not exceed kv_lora_rank + qk_rope_head_dim");
    if (!r.boolean_or("mla_use_nope", false))
        r.fail("mla_use_nope", "must be true: Kimi MLA applies no rotary embedding (RoPE MLA is not supported)");
}

// KDA: linear_attn_config, and which layers are KDA and which MLA (its two 1-based lists).
void read_kda(const ConfigReader& r, ModelConfig& c) {
    const json& lac = r.need("linear_attn_config");
    if (!lac.is_object()) r.fail("linear_attn_config", "must be an object");
    ConfigReader lr{lac, r.source, "linear_attn_config."};
    c.kda_heads = lr.integer("num_heads", 1, 4096);
    c.kda_head_dim = lr.integer("head_dim", 1, 512);
    c.conv_kernel = lr.integer("short_conv_kernel_size", 1, 64);
    c.kda_full_rank_gate = lr.boolean_or("use_full_rank_gate", false);
    if (auto it = lac.find("gate_lower_bound"); it != lac.end() && !it->is_null()) {
        c.kda_has_lower_bound = true;
        c.kda_gate_lower_bound = float(lr.number("gate_lower_bound", -1e4, -1e-6));
    }
    const auto kda = lr.int_list("kda_layers");
    const auto full = lr.int_list("full_attn_layers");
    c.layer_kinds.assign(size_t(c.n_layers), LayerKind::kKda);
    std::set<int64_t> seen;
    for (auto [list, kind, name] :
         {std::tuple{&kda, LayerKind::kKda, "kda_layers"}, std::tuple{&full, LayerKind::kMla, "full_attn_layers"}}) {
        for (int64_t l : *list) {
            if (l < 1 || l > c.n_layers)
                lr.fail(name,
                        "has layer " + std::to_string(l) + " outside 1.." + std::to_string(c.n_layers) +
                            " (the lists are 1-based)");
            if (!seen.insert(l).second) lr.fail(name, "lists layer " + std::to_string(l) + " twice (or in both lists)");
            c.layer_kinds[size_t(l - 1)] = kind;
        }
    }
    if (int64_t(seen.size()) != c.n_layers)
        lr.fail("kda_layers", "and full_attn_layers together must cover every layer 1.." + std::to_string(c.n_layers));
}

// MoE: the routed and shared experts, the grouped top-k, the latent experts.
void read_moe(const ConfigReader& r, ModelConfig& c) {
    const json& j = r.j;
    c.n_experts = r.integer("num_experts", 1, 4096);
    c.n_experts_per_token = r.integer("num_experts_per_token", 1, c.n_experts);
    c.n_shared_experts = r.integer_or("num_shared_experts", 0, 0, 64);
    c.moe_intermediate_size = r.integer("moe_intermediate_size", 1, kMaxDim);
    c.first_k_dense_replace = r.integer_or("first_k_dense_replace", 0, 0, c.n_layers);
    c.moe_layer_freq = r.integer_or("moe_layer_freq", 1, 1, c.n_layers);
    c.moe_renormalize = r.boolean_or("moe_renormalize", true);
    c.routed_scaling_factor = float(r.number("routed_scaling_factor", -1e6, 1e6));
    if (r.string_or("moe_router_activation_func", "sigmoid") != "sigmoid")
        r.fail("moe_router_activation_func", "must be \"sigmoid\"");
    if (r.boolean_or("use_grouped_topk", true)) {
        c.n_expert_groups = r.integer_or("num_expert_group", 1, 1, c.n_experts);
        c.topk_groups = r.integer_or("topk_group", 1, 1, c.n_expert_groups);
    }
    if (c.n_experts % c.n_expert_groups != 0) r.fail("num_expert_group", "must divide num_experts");
    if (auto it = j.find("routed_expert_hidden_size"); it != j.end() && !it->is_null()) {
        c.moe_latent_dim = r.integer("routed_expert_hidden_size", 1, kMaxDim);
        c.moe_latent_norm = r.boolean_or("latent_moe_use_norm", false);
    }
    c.attn_res_block_size = r.integer_or("attn_res_block_size", 0, 0, int64_t(1) << 30);   // ≥ layers: one block
    if (c.n_experts_per_token > c.n_experts / c.n_expert_groups * c.topk_groups)
        r.fail("num_experts_per_token", "exceeds the experts in the kept groups (topk_group × experts per group)");
    if (r.integer_or("num_nextn_predict_layers", 0, 0, 64) != 0)
        r.fail("num_nextn_predict_layers", "must be 0 (multi-token-prediction layers are not supported)");
}

}   // namespace

ModelConfig parse_model_config(const json& top, const std::string& source) {
    if (!top.is_object()) throw Error(source + ": config must be a JSON object");
    ConfigReader tr{top, source, ""};
    ModelConfig c;
    if (auto it = top.find("architectures"); it != top.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
        c.architecture = (*it)[0].get<std::string>();
    else
        tr.fail("architectures",
                "is missing (expected [\"KimiLinearForCausalLM\"] or [\"KimiK3ForConditionalGeneration\"])");
    if (c.architecture != "KimiLinearForCausalLM" && c.architecture != "KimiK3ForConditionalGeneration")
        tr.fail("architectures",
                "names '" + c.architecture +
                    "'; only KimiLinearForCausalLM and KimiK3ForConditionalGeneration are supported");
    const json* quant = find_quantization(top);
    std::string quant_where = source + ": ";
    // Kimi-K3 nests the text model's keys under text_config (vision_config beside it) and
    // prefixes its tensors with `language_model.`.
    const bool k3 = c.architecture == "KimiK3ForConditionalGeneration";
    if (k3) {
        const json& t = tr.need("text_config");
        if (!t.is_object()) tr.fail("text_config", "must be an object");
        if (const json* tq = find_quantization(t)) {
            if (quant) throw Error(source + ": quantization_config given both at the top level and in text_config");
            quant = tq;
            quant_where = source + ": text_config.";
        }
        c.tensor_prefix = "language_model.";
    }
    const json& j = k3 ? top["text_config"] : top;
    ConfigReader r{j, source, k3 ? "text_config." : ""};
    // Token ids may sit at the top level of a multimodal config only.
    const ConfigReader& ids = (k3 && !j.contains("eos_token_id")) ? tr : r;

    if (quant) c.quant = parse_quant_config(*quant, quant_where);
    c.vocab_size = r.integer("vocab_size", 1, int64_t(1) << 26);
    c.hidden_size = r.integer("hidden_size", 1, 65536);
    c.n_layers = r.integer("num_hidden_layers", 1, 1024);
    c.intermediate_size = r.integer("intermediate_size", 1, kMaxDim);
    c.rms_norm_eps = float(r.number("rms_norm_eps", 0.0, 1.0));
    c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
    c.bos_token_id = int32_t(ids.integer_or("bos_token_id", -1, -1, c.vocab_size - 1));
    c.eos_token_id = int32_t(ids.integer_or("eos_token_id", -1, -1, c.vocab_size - 1));
    c.pad_token_id = int32_t(ids.integer_or("pad_token_id", -1, -1, c.vocab_size - 1));
    c.max_position_embeddings =
        r.integer_or("model_max_length", r.integer_or("max_position_embeddings", 0, 0, INT64_MAX), 0, INT64_MAX);
    read_activation(r, c);

    read_mla(r, c);
    read_kda(r, c);
    read_moe(r, c);
    if (k3) {
        try {
            c.vision = parse_vision_config(top, source, c.hidden_size, c.vocab_size);
        } catch (const Error& e) {   // the text model needs none of it: load without the tower
            c.vision = VisionConfig{};
            c.vision.unsupported = e.what();
        }
    }
    return c;
}

ModelConfig load_model_config(const std::string& model_dir) {
    if (is_gguf_path(model_dir)) {   // the metadata read through a lazy map: no weight is touched
        const GgufModel g(model_dir, FileMemory::kMapLazy);
        return parse_model_config(gguf_model_config_json(g), model_dir);
    }
    const std::string path = model_dir + "/config.json";
    check_regular_file(path, /*missing_ok=*/true);   // a missing one is the error below
    std::ifstream f(path);
    if (!f) throw Error(path + ": cannot open (is --model a Kimi Linear or Kimi-K3 model directory?)");
    json j;
    try {
        j = json::parse(f);
    } catch (const json::exception& e) {
        throw Error(path + ": invalid JSON: " + e.what());
    }
    return parse_model_config(j, path);
}

}   // namespace kimi
