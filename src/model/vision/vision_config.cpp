// The K3 `vision_config` (MoonViT tower + patchmergerv2 projector) → VisionConfig, checked
// against what the engine implements. ref: docs/vision.md#config.
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/config_reader.h"

namespace kimi {

namespace {

// A string key that must hold one value (absent: the published one).
void expect(const ConfigReader& r, const std::string& key, const std::string& want) {
    const std::string got = r.string_or(key, want);
    if (got != want) r.fail(key, "= \"" + got + "\" is not supported (the engine implements \"" + want + "\")");
}

void expect_false(const ConfigReader& r, const std::string& key) {
    if (r.boolean_or(key, false)) r.fail(key, "must be false (the published tower has no biases)");
}

}   // namespace

VisionConfig parse_vision_config(const nlohmann::json& top, const std::string& source, int64_t text_hidden,
                                 int64_t vocab_size) {
    VisionConfig v;
    auto it = top.find("vision_config");
    if (it == top.end() || it->is_null()) return v;
    if (!it->is_object()) throw Error(source + ": config key 'vision_config' must be an object");
    const ConfigReader tr{top, source, ""};
    const ConfigReader r{*it, source, "vision_config."};
    v.present = true;
    v.patch_size = r.integer_or("patch_size", v.patch_size, 1, 256);
    v.hidden = r.integer_or("vt_hidden_size", v.hidden, 1, 65536);
    v.n_layers = r.integer_or("vt_num_hidden_layers", v.n_layers, 1, 1024);
    v.n_heads = r.integer_or("vt_num_attention_heads", v.n_heads, 1, 1024);
    v.qkv_dim = r.integer_or("qkv_hidden_size", v.hidden, 1, 65536);
    v.intermediate = r.integer_or("vt_intermediate_size", v.intermediate, 1, int64_t(1) << 20);
    v.pos_emb_h = r.integer_or("init_pos_emb_height", v.pos_emb_h, 1, 4096);
    v.pos_emb_w = r.integer_or("init_pos_emb_width", v.pos_emb_w, 1, 4096);
    v.projector_eps = float(r.number_or("projector_ln_eps", v.projector_eps, 0.0, 1.0));
    if (v.qkv_dim % v.n_heads != 0) r.fail("qkv_hidden_size", "must be a multiple of vt_num_attention_heads");
    if (v.head_dim() % 4 != 0) r.fail("qkv_hidden_size", "/ vt_num_attention_heads must be a multiple of 4 (2-D RoPE)");
    if (auto mk = it->find("merge_kernel_size"); mk != it->end() && !mk->is_null()) {
        const bool two_by_two = (mk->is_array() && mk->size() == 2 && (*mk)[0] == 2 && (*mk)[1] == 2) || *mk == 2;
        if (!two_by_two) r.fail("merge_kernel_size", "must be [2, 2] (the only merge the engine implements)");
    }
    const int64_t mm = r.integer_or("mm_hidden_size", v.hidden, 1, 65536);
    if (mm != v.hidden) r.fail("mm_hidden_size", "must equal vt_hidden_size (the projector reads the tower's output)");
    v.text_hidden = r.integer_or("text_hidden_size", text_hidden, 1, 65536);
    if (v.text_hidden != text_hidden)
        r.fail("text_hidden_size",
               "= " + std::to_string(v.text_hidden) + " differs from text_config.hidden_size " +
                   std::to_string(text_hidden));
    expect(r, "mlp_type", "mlp2");
    expect(r, "activation_func", "gelu_pytorch_tanh");
    expect(r, "norm_type", "rmsnorm");
    expect(r, "pos_emb_type", "divided_fixed");
    expect(r, "pos_emb_interpolation_mode", "bilinear");
    expect(r, "merge_type", "sd2_tpool");
    expect(r, "mm_projector_type", "patchmergerv2");
    expect(r, "projector_hidden_act", "gelu");
    for (const char* k : {"attn_bias", "linear_bias", "patch_embed_proj_bias"}) expect_false(r, k);
    v.media_pad_id = int32_t(tr.integer_or("media_placeholder_token_id", -1, 0, vocab_size - 1));
    return v;
}

}   // namespace kimi
