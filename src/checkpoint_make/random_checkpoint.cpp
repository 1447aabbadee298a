// Random checkpoint generation (see random_checkpoint.h). Scales keep activations
// well-conditioned through all layers: projections N(0, 1/fan_in), output projections
// halved, norms near 1, decays like trained KDA (A in [1, 16], softplus(dt_bias) in
// [0.001, 0.1]), small router correction biases.
#include "checkpoint_make/random_checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/tensor_layout.h"
#include "checkpoint/mxfp4_quantize.h"
#include "checkpoint/safetensors_writer.h"

namespace kimi {

using nlohmann::ordered_json;

namespace {

ordered_json base_config() {
    return ordered_json{
        {"architectures", {"KimiLinearForCausalLM"}},
        {"model_type", "kimi_linear"},
        {"dtype", "bfloat16"},
        {"vocab_size", 1280},
        {"hidden_size", 64},
        {"num_hidden_layers", 4},
        {"intermediate_size", 128},
        {"hidden_act", "silu"},
        {"rms_norm_eps", 1e-5},
        {"head_dim", 16},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 4},
        {"q_lora_rank", nullptr},
        {"kv_lora_rank", 32},
        {"qk_nope_head_dim", 16},
        {"qk_rope_head_dim", 8},
        {"v_head_dim", 16},
        {"mla_use_nope", true},
        {"rope_theta", 10000.0},
        {"rope_scaling", nullptr},
        {"model_max_length", 4096},
        {"num_experts", 8},
        {"num_experts_per_token", 2},
        {"num_shared_experts", 1},
        {"moe_intermediate_size", 32},
        {"first_k_dense_replace", 1},
        {"moe_layer_freq", 1},
        {"moe_router_activation_func", "sigmoid"},
        {"moe_renormalize", true},
        {"routed_scaling_factor", 2.446},
        {"use_grouped_topk", true},
        {"num_expert_group", 1},
        {"topk_group", 1},
        {"num_nextn_predict_layers", 0},
        {"tie_word_embeddings", false},
        {"bos_token_id", 1024},
        {"eos_token_id", 1026},
        {"pad_token_id", 1279},
        {"use_cache", true},
        {"linear_attn_config",
         {{"head_dim", 16},
          {"num_heads", 2},
          {"short_conv_kernel_size", 4},
          {"kda_layers", {1, 2, 3}},
          {"full_attn_layers", {4}}}},
    };
}

// K3's vision_config with every published key (docs/vision.md#config), at the given widths:
// tower width d, blocks, heads (head_dim d / heads), MLP width, position-embedding grid side.
ordered_json vision_config(int64_t d, int64_t blocks, int64_t heads, int64_t mlp, int64_t grid, int64_t text_hidden) {
    return ordered_json{{"model_type", "moonvit3d"},
                        {"patch_size", 14},
                        {"init_pos_emb_height", grid},
                        {"init_pos_emb_width", grid},
                        {"init_pos_emb_time", 4},
                        {"pos_emb_type", "divided_fixed"},
                        {"pos_emb_interpolation_mode", "bilinear"},
                        {"vt_num_attention_heads", heads},
                        {"vt_num_hidden_layers", blocks},
                        {"vt_hidden_size", d},
                        {"qkv_hidden_size", d},
                        {"vt_intermediate_size", mlp},
                        {"mlp_type", "mlp2"},
                        {"activation_func", "gelu_pytorch_tanh"},
                        {"norm_type", "rmsnorm"},
                        {"attn_bias", false},
                        {"linear_bias", false},
                        {"patch_embed_proj_bias", false},
                        {"merge_kernel_size", {2, 2}},
                        {"merge_type", "sd2_tpool"},
                        {"mm_projector_type", "patchmergerv2"},
                        {"mm_hidden_size", d},
                        {"projector_hidden_act", "gelu"},
                        {"projector_ln_eps", 1e-5},
                        {"text_hidden_size", text_hidden}};
}

// Kimi-K3 as published (docs/model.md#k3): the text model's keys under text_config, every K3
// building block on, at tiny sizes; a vision tower beside it (D 32, 2 blocks, an 8×8
// position grid, so that most images need its interpolation).
ordered_json k3_base_config() {
    ordered_json t = base_config();
    t.erase("architectures");
    t["hidden_act"] = "situ";
    t["activation_situ_beta"] = 4.0;
    t["activation_situ_linear_beta"] = 25.0;
    t["num_hidden_layers"] = 5;
    t["q_lora_rank"] = 24;
    t["mla_use_output_gate"] = true;
    t["num_shared_experts"] = 2;
    t["routed_scaling_factor"] = 1.0;
    t["routed_expert_hidden_size"] = 48;
    t["latent_moe_use_norm"] = true;
    t["attn_res_block_size"] = 2;
    t["linear_attn_config"] = {{"head_dim", 16},
                               {"num_heads", 2},
                               {"short_conv_kernel_size", 4},
                               {"kda_layers", {1, 2, 3, 5}},
                               {"full_attn_layers", {4}},
                               {"use_full_rank_gate", true},
                               {"gate_lower_bound", -5.0}};
    return ordered_json{
        {"architectures", {"KimiK3ForConditionalGeneration"}},
        {"model_type", "kimi_k3"},
        {"dtype", "bfloat16"},
        {"text_config", t},
        {"vision_config", vision_config(32, 2, 2, 64, 8, t["hidden_size"].get<int64_t>())},
        {"media_placeholder_token_id", t["vocab_size"].get<int64_t>() - 256 + 21},
        {"image_placeholder", "<|kimi_image_placeholder|>"},
        {"bos_token_id", t["bos_token_id"]},
        {"eos_token_id", t["eos_token_id"]},
        {"pad_token_id", t["pad_token_id"]},
    };
}

// K3's preprocessor_config.json (docs/vision.md#pixels).
ordered_json preprocessor_config() {
    return ordered_json{{"image_processor_type", "KimiK3VisionProcessor"},
                        {"media_proc_cfg",
                         {{"patch_size", 14},
                          {"merge_kernel_size", 2},
                          {"in_patch_limit", 65536},
                          {"patch_limit_on_one_side", 512},
                          {"image_mean", {0.5, 0.5, 0.5}},
                          {"image_std", {0.5, 0.5, 0.5}},
                          {"transparent_bg_config",
                           {{"pattern", "chessboard"},
                            {"chessboard_square_size", 8},
                            {"chessboard_square_on_top_left", true},
                            {"chessboard_white_value", 255},
                            {"chessboard_gray_value", 180}}},
                          {"transparent_bg_fill_stage", "after_resize"}}}};
}

// The object holding the text model's keys: text_config (K3) or the config itself.
ordered_json& text_of(ordered_json& c) { return c.contains("text_config") ? c["text_config"] : c; }

void set_vocab(ordered_json& c, int64_t vocab) {
    const int64_t n_base = vocab - 256;   // Kimi layout: 256 special slots after the base ranks
    auto ids = [&](ordered_json& o) {
        o["bos_token_id"] = n_base;
        o["eos_token_id"] = n_base + 2;
        o["pad_token_id"] = vocab - 1;
    };
    ordered_json& t = text_of(c);
    t["vocab_size"] = vocab;
    ids(t);
    if (&t != &c) ids(c);   // a multimodal config repeats the token ids at the top level
    if (c.contains("media_placeholder_token_id")) c["media_placeholder_token_id"] = n_base + 21;   // <|media_pad|>
}

struct Spec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    enum Kind { kLinear, kOutLinear, kEmbed, kNorm, kConv, kALog, kDtBias, kScoreBias, kPosEmb } kind;
    bool routed_expert = false;
    // kPacked / kScale: the MXFP4 form of the BF16 weight `dense` (its values drawn as they
    // would be for it, then quantized group by group).
    enum Form { kDense, kPacked, kScale } form = kDense;
    std::string dense = {};
    int64_t dense_in = 0;   // the BF16 weight's input width (its fan-in)
};

// Replaces each routed expert's BF16 weight by its MXFP4 pair (weight_packed U8 [out, in/2],
// weight_scale U8 [out, in/32]), as the published Kimi-K3 checkpoint stores them; a weight
// whose input width is not a multiple of 32 stays BF16, with a notice.
std::vector<Spec> pack_experts(const std::vector<Spec>& dense) {
    std::vector<Spec> out;
    size_t n_left = 0;
    std::string left;
    for (const Spec& sp : dense) {
        if (!sp.routed_expert) {
            out.push_back(sp);
            continue;
        }
        const int64_t rows = sp.shape[0], cols = sp.shape[1];
        if (cols % kMxfp4Group != 0) {
            if (n_left++ == 0) left = sp.name + " (input width " + std::to_string(cols) + ")";
            out.push_back(sp);
            continue;
        }
        const std::string module = sp.name.substr(0, sp.name.size() - 7);   // less ".weight"
        out.push_back(
            {module + ".weight_packed", DType::kU8, {rows, cols / 2}, sp.kind, true, Spec::kPacked, sp.name, cols});
        out.push_back({module + ".weight_scale",
                       DType::kU8,
                       {rows, cols / kMxfp4Group},
                       sp.kind,
                       true,
                       Spec::kScale,
                       sp.name,
                       cols});
    }
    if (n_left > 0)
        std::fprintf(stderr, "make-model: %zu expert weights stay BF16: input width not a multiple of 32, e.g. %s\n",
                     n_left, left.c_str());
    return out;
}

// Every tensor of the checkpoint, from its tensor layout (published names, shapes and dtypes):
// the text model's, then for K3 the vision tower's and projector's.
std::vector<Spec> checkpoint_specs(const ModelConfig& c) {
    std::vector<Spec> s;
    const TensorLayout layout(c);
    for (const TensorRow& r : layout.rows()) {
        Spec::Kind k = Spec::kLinear;
        switch (r.role) {
            case TensorRole::kEmbedding: k = Spec::kEmbed; break;
            case TensorRole::kNorm: k = Spec::kNorm; break;
            case TensorRole::kConv: k = Spec::kConv; break;
            case TensorRole::kALog: k = Spec::kALog; break;
            case TensorRole::kDtBias: k = Spec::kDtBias; break;
            case TensorRole::kScoreBias: k = Spec::kScoreBias; break;
            case TensorRole::kPosEmb: k = Spec::kPosEmb; break;
            default: k = r.out_proj ? Spec::kOutLinear : Spec::kLinear;
        }
        s.push_back({layout.full_name(r), r.dtype, r.shape, k, r.role == TensorRole::kRoutedExpert});
        // the patch embedding is a linear map of the 3·p·p pixels of a patch
        if (r.role == TensorRole::kPatchEmbed) s.back().dense_in = r.shape[1] * r.shape[2] * r.shape[3];
    }
    return s;
}

uint64_t name_hash(const std::string& s) {   // FNV-1a
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    return h;
}

double draw(const Spec& sp, Rng& r) {
    const double fan_in = sp.dense_in > 0 ? double(sp.dense_in) : sp.shape.size() >= 2 ? double(sp.shape.back()) : 1.0;
    switch (sp.kind) {
        case Spec::kLinear: return r.normal() / std::sqrt(fan_in);
        case Spec::kOutLinear: return 0.5 * r.normal() / std::sqrt(fan_in);
        case Spec::kEmbed: return r.normal();
        case Spec::kNorm: return 1.0 + 0.1 * r.normal();
        case Spec::kConv: return r.normal() / std::sqrt(double(sp.shape.back()));
        case Spec::kALog: return std::log(r.uniform(1.0, 16.0));
        case Spec::kDtBias: {
            const double dt = std::exp(r.uniform(std::log(0.001), std::log(0.1)));
            return std::log(std::expm1(dt));   // softplus⁻¹(dt)
        }
        case Spec::kScoreBias: return r.uniform(-0.05, 0.05);
        case Spec::kPosEmb: return 0.5 * r.normal();
    }
    return 0.0;
}

void make_dirs(const std::string& dir) {
    std::string cur;
    for (size_t i = 0; i <= dir.size(); ++i) {
        if (i == dir.size() || dir[i] == '/') {
            if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
        }
        if (i < dir.size()) cur.push_back(dir[i]);
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error(dir + ": cannot create directory");
}

}   // namespace

std::vector<std::string> model_preset_names() { return {"tiny", "small", "bench", "k3-tiny", "k3-small", "k3-bench"}; }

uint64_t preset_shard_bytes(const std::string& name) {
    if (name == "k3-small") return uint64_t(16) << 20;   // a few shards, so the index path is exercised
    if (name == "k3-bench") return uint64_t(2) << 30;
    return 0;
}

// The widths of the "small" presets (Kimi Linear and Kimi-K3 alike): 8 layers of width 512.
static ordered_json small_widths() {
    return ordered_json{
        {"hidden_size", 512},
        {"num_hidden_layers", 8},
        {"intermediate_size", 1408},
        {"head_dim", 64},
        {"num_attention_heads", 8},
        {"num_key_value_heads", 8},
        {"kv_lora_rank", 128},
        {"qk_nope_head_dim", 64},
        {"qk_rope_head_dim", 32},
        {"v_head_dim", 64},
        {"num_experts", 16},
        {"num_experts_per_token", 4},
        {"moe_intermediate_size", 256},
        {"model_max_length", 8192},
        {"linear_attn_config",
         {{"head_dim", 64}, {"num_heads", 8}, {"kda_layers", {1, 2, 3, 5, 6, 7}}, {"full_attn_layers", {4, 8}}}}};
}

ordered_json model_preset(const std::string& name) {
    if (name == "k3-tiny") return k3_base_config();
    if (name == "k3-small") {
        ordered_json c = k3_base_config();
        c["text_config"].merge_patch(small_widths());
        c["text_config"].merge_patch(
            ordered_json{{"q_lora_rank", 192}, {"routed_expert_hidden_size", 384}, {"attn_res_block_size", 3}});
        c["vision_config"] = vision_config(128, 2, 4, 256, 16, 512);
        set_vocab(c, 8192 + 256);
        return c;
    }
    if (name == "k3-bench") {   // Kimi-K3's real per-layer widths; 3 layers, 20 experts, small vocabulary
        ordered_json c = k3_base_config();
        c["text_config"].merge_patch(
            ordered_json{{"hidden_size", 7168},
                         {"num_hidden_layers", 3},
                         {"intermediate_size", 33792},
                         {"head_dim", 128},
                         {"num_attention_heads", 96},
                         {"num_key_value_heads", 96},
                         {"q_lora_rank", 1536},
                         {"kv_lora_rank", 512},
                         {"qk_nope_head_dim", 128},
                         {"qk_rope_head_dim", 64},
                         {"v_head_dim", 128},
                         {"num_experts", 20},
                         {"num_experts_per_token", 16},
                         {"moe_intermediate_size", 3072},
                         {"routed_expert_hidden_size", 3584},
                         {"attn_res_block_size", 2},
                         {"model_max_length", 262144},
                         {"linear_attn_config",
                          {{"head_dim", 128}, {"num_heads", 96}, {"kda_layers", {1, 2}}, {"full_attn_layers", {3}}}}});
        // the published tower (27 blocks of width 1024, head_dim 128) and projector
        c["vision_config"] = vision_config(1024, 27, 12, 4096, 64, 7168);
        c["vision_config"]["qkv_hidden_size"] = 1536;
        set_vocab(c, 16384 + 256);
        return c;
    }
    ordered_json c = base_config();
    if (name == "tiny") return c;
    if (name == "small") {
        c.merge_patch(small_widths());
        set_vocab(c, 8192 + 256);
        return c;
    }
    if (name == "bench") {   // Kimi-Linear-48B layer widths, 4 layers, 64 experts
        c.merge_patch(ordered_json{
            {"hidden_size", 2304},
            {"num_hidden_layers", 4},
            {"intermediate_size", 9216},
            {"head_dim", 72},
            {"num_attention_heads", 32},
            {"num_key_value_heads", 32},
            {"kv_lora_rank", 512},
            {"qk_nope_head_dim", 128},
            {"qk_rope_head_dim", 64},
            {"v_head_dim", 128},
            {"num_experts", 64},
            {"num_experts_per_token", 8},
            {"moe_intermediate_size", 1024},
            {"model_max_length", 1048576},
            {"linear_attn_config",
             {{"head_dim", 128}, {"num_heads", 32}, {"kda_layers", {1, 2, 3}}, {"full_attn_layers", {4}}}}});
        set_vocab(c, 163840);
        return c;
    }
    std::string all;
    for (const auto& n : model_preset_names()) all += (all.empty() ? "" : ", ") + n;
    throw Error("unknown preset '" + name + "' (available: " + all + ")");
}

void apply_config_override(ordered_json& config, const std::string& assignment) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--set expects key=value, got '" + assignment + "'");
    const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    ordered_json value;
    try {
        value = ordered_json::parse(text);
    } catch (const nlohmann::json::exception&) {
        value = text;   // a bare word is a string
    }
    ordered_json* node = &config;
    size_t pos = 0;
    for (;;) {
        const size_t dot = key.find('.', pos);
        const std::string part = key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        if (part.empty()) throw Error("--set: bad key '" + key + "'");
        if (!node->is_object()) throw Error("--set: '" + key + "' descends into a non-object");
        if (dot == std::string::npos) {
            (*node)[part] = value;
            // keep the dependent keys of a published config consistent
            ordered_json& text = text_of(config);
            if (node == &text && part == "vocab_size" && value.is_number_integer())
                set_vocab(config, value.get<int64_t>());
            if (node == &text && part == "num_attention_heads") text["num_key_value_heads"] = value;
            if (node == &text && part == "hidden_size" && config.contains("vision_config"))
                config["vision_config"]["text_hidden_size"] = value;
            return;
        }
        node = &(*node)[part];
        pos = dot + 1;
    }
}

void write_random_checkpoint(const std::string& dir, const ordered_json& config_in, uint64_t seed,
                             const std::function<void(uint64_t, uint64_t)>& progress, uint64_t max_shard_bytes,
                             bool mxfp4_experts) {
    ordered_json config = config_in;
    if (mxfp4_experts) {
        ordered_json& text = text_of(config);
        if (text.contains("quantization_config") || config.contains("quantization_config"))
            throw Error("--mxfp4-experts: the config already has a quantization_config");
        text["quantization_config"] = published_k3_quant_config();
    }
    const ModelConfig c = parse_model_config(nlohmann::json::parse(config.dump()), "generated config");
    make_dirs(dir);
    {
        std::ofstream f(dir + "/config.json");
        f << config.dump(2) << "\n";
        if (!f) throw Error(dir + "/config.json: write failed");
    }
    if (c.vision.present) {   // the image preprocessing settings as the K3 checkpoint publishes them
        std::ofstream f(dir + "/preprocessor_config.json");
        f << preprocessor_config().dump(2) << "\n";
        if (!f) throw Error(dir + "/preprocessor_config.json: write failed");
    }
    const std::vector<Spec> specs = mxfp4_experts ? pack_experts(checkpoint_specs(c)) : checkpoint_specs(c);
    std::vector<SafetensorsWriter::Entry> entries;
    uint64_t total = 0;
    for (const auto& s : specs) {
        entries.push_back({s.name, s.dtype, s.shape});
        total += entries.back().numel() * dtype_size(s.dtype);
    }
    std::map<std::string, const Spec*> by_name;
    for (const auto& s : specs) by_name[s.name] = &s;
    uint64_t done = 0;
    ThreadPool pool(ThreadPool::default_threads());
    constexpr uint64_t kStream = uint64_t(1) << 16;   // elements per random stream
    for (const char* stale : {"/model.safetensors", "/model.safetensors.index.json"})
        std::remove((dir + stale).c_str());
    // One stream per (seed, tensor, 64K-element block): independent of the writer's chunking
    // and of the thread count. An MXFP4 pair draws its BF16 weight's stream (element e of the
    // weight: byte e / 2 of weight_packed, byte e / 32 of weight_scale) and quantizes it as
    // `kimi-cpp quantize` would.
    const auto block_values = [&](const Spec& sp, uint64_t e0, uint64_t n, float* v) {
        Rng r(seed ^ name_hash(sp.form == Spec::kDense ? sp.name : sp.dense) ^ (e0 / kStream * 0x9e3779b97f4a7c15ull));
        for (uint64_t i = 0; i < n; ++i) v[i] = float(draw(sp, r));
    };
    const auto fill = [&](const SafetensorsWriter::Entry& e, uint64_t offset, uint64_t n, void* out) {
        const Spec& sp = *by_name.at(e.name);
        const uint64_t per_byte = sp.form == Spec::kPacked ? 2 : sp.form == Spec::kScale ? kMxfp4Group : 0;
        const uint64_t e_begin = per_byte ? offset * per_byte : offset,
                       e_end = per_byte ? (offset + n) * per_byte : offset + n;
        KIMI_CHECK(e_begin % kStream == 0, "writer chunks must align to streams");
        pool.parallel_for(int64_t((e_end - e_begin + kStream - 1) / kStream), [&](int64_t blk) {
            const uint64_t b0 = e_begin + uint64_t(blk) * kStream, b1 = std::min(e_end, b0 + kStream);
            std::vector<float> v(size_t(b1 - b0));
            block_values(sp, b0, b1 - b0, v.data());
            if (per_byte) {   // whole groups (a block holds 2048) of the BF16 weight's values
                for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
                auto* dst = static_cast<uint8_t*>(out) + (b0 - e_begin) / per_byte;
                uint8_t q[16], sc = 0;
                for (uint64_t g = 0; g < (b1 - b0) / kMxfp4Group; ++g) {
                    mxfp4_quantize_group(v.data() + g * kMxfp4Group, q, &sc);
                    if (sp.form == Spec::kPacked)
                        std::memcpy(dst + g * 16, q, 16);
                    else
                        dst[g] = sc;
                }
            } else {
                for (uint64_t i = b0; i < b1; ++i) {
                    const float x = v[size_t(i - b0)];
                    if (e.dtype == DType::kF32)
                        static_cast<float*>(out)[i - offset] = x;
                    else
                        static_cast<uint16_t*>(out)[i - offset] = f32_to_bf16(x);
                }
            }
        });
        done += n * dtype_size(e.dtype);
        if (progress) progress(done, total);
    };
    SafetensorsWriter::write_checkpoint(dir, entries, fill, max_shard_bytes);
}

}   // namespace kimi
