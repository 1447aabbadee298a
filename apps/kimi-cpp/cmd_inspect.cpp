// `kimi-cpp inspect`: a model directory's config summary (with the Kimi-K3 building blocks
// it switches on), layer map, parameter count, bytes, skipped non-text tensors, the bytes one
// decode step must read, and the per-sequence cache sizes. `--tensors [--json]`: the tensor
// manifest of the checkpoint (model/tensor_layout.h) instead.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "args.h"
#include "chat/chat_format.h"
#include "commands.h"
#include "checkpoint/gguf_file.h"
#include "core/error.h"
#include "dist/comm.h"
#include "engine_options.h"
#include "model/kimi_model.h"
#include "model/tensor_layout.h"
#include "runtime/step_traffic.h"
#include "image/image_input.h"

namespace kimi::app {

namespace {
std::string fmt_mib(double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / 1048576.0);
    return b;
}
}   // namespace

namespace {
double mib(double b) { return b / 1048576.0; }

// One tensor the checkpoint holds, as `inspect --tensors` lists it.
struct HeldTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::string dtype;
    bool quantizable = false;
    int split = -1;
    std::string gguf;   // the GGUF tensor that holds it as llama.cpp converts it ("": none)
};

std::vector<int64_t> shape_of(const Tensor& t) { return {t.shape.begin(), t.shape.begin() + t.rank}; }

// The checkpoint's tensors by its tensor layout, in layout order and in the form stored (an
// MXFP4 linear as its weight_packed and weight_scale), then whatever else the files hold
// with no split and not quantizable. A layout row the files lack is an error, as it is for the
// loader (the vision tower may be absent as a whole).
std::vector<HeldTensor> held_tensors(const std::string& dir) {
    const ModelConfig c = load_model_config(dir);
    const TensorLayout layout(c);
    const std::vector<GgufSource> gguf = layout.gguf_sources();
    const WeightStore store(dir, WeightMemory::kMmapLazy, {}, &gguf);
    std::map<std::string, Tensor> stored;
    for (const auto& [name, t] : store.all_tensors()) stored.emplace(name, t);
    std::vector<HeldTensor> out;
    const auto take = [&](const std::string& name, bool quantizable, int split, const std::string& g) {
        const auto it = stored.find(name);
        if (it == stored.end()) return false;
        out.push_back({name, shape_of(it->second), dtype_name(it->second.dtype), quantizable, split, g});
        stored.erase(it);
        return true;
    };
    // A K3 directory may come without its vision tower (a text-only export): then none of it.
    const TensorRow* patch = layout.find(Slot::kPatchEmbed);
    const bool tower = patch && stored.count(layout.full_name(*patch)) > 0;
    for (const TensorRow& r : layout.rows()) {
        if (r.vision && !tower) continue;
        const std::string full = layout.full_name(r);
        const std::string g = r.gguf_form == GgufForm::kSplitKvB ? r.gguf + " + " + r.gguf_v : r.gguf;
        if (take(full, r.quantizable(), r.split, g)) continue;
        const std::string module = layout.prefix() + r.module();
        if (r.is_linear() && take(module + ".weight_packed", true, r.split, g) &&
            take(module + ".weight_scale", true, r.split, g))
            continue;
        throw Error(dir + ": tensor '" + full + "' is missing (the config implies it)");
    }
    for (const auto& [name, t] : stored) out.push_back({name, shape_of(t), dtype_name(t.dtype), false, -1, ""});
    return out;
}

int print_tensors(const std::string& dir, bool json) {
    const std::vector<HeldTensor> rows = held_tensors(dir);
    if (json) {
        nlohmann::json a = nlohmann::json::array();
        for (const HeldTensor& r : rows)
            a.push_back({{"name", r.name},
                         {"shape", r.shape},
                         {"dtype", r.dtype},
                         {"quantizable", r.quantizable},
                         {"split", r.split < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.split)}});
        std::printf("%s\n", a.dump(1).c_str());
        return 0;
    }
    std::printf("%-64s %-20s %-5s %-11s %-5s %s\n", "name", "shape", "dtype", "quantizable", "split", "gguf");
    for (const HeldTensor& r : rows) {
        std::string shape;
        for (int64_t d : r.shape) shape += (shape.empty() ? "[" : ", ") + std::to_string(d);
        std::printf("%-64s %-20s %-5s %-11s %-5s %s\n", r.name.c_str(),
                    (shape.empty() ? std::string("[]") : shape + "]").c_str(), r.dtype.c_str(),
                    r.quantizable ? "yes" : "no", r.split < 0 ? "-" : std::to_string(r.split).c_str(),
                    r.gguf.empty() ? "-" : r.gguf.c_str());
    }
    std::printf("%zu tensors\n", rows.size());
    return 0;
}
// The vision tower (K3): its structure, parameters and bytes, and the image budget.
void print_vision(const KimiModel& model, const std::string& dir) {
    const VisionConfig& v = model.config().vision;
    if (!model.has_vision()) {
        if (model.config().is_k3_layout())
            std::printf("vision:       none (%s)\n", model.vision_unavailable_reason().c_str());
        return;
    }
    int64_t params = 0, bytes = 0;
    const TensorLayout layout(model.config());
    for (const TensorRow& r : layout.rows()) {
        if (!r.vision) continue;
        int64_t n = 1;
        for (int64_t x : r.shape) n *= x;
        params += n;
        bytes += n * int64_t(dtype_size(r.dtype));
    }
    std::printf(
        "vision:       MoonViT, %lld blocks of width %lld (%lld heads x %lld, MLP %lld), patch %lld, position "
        "grid %lldx%lld\n",
        (long long)v.n_layers, (long long)v.hidden, (long long)v.n_heads, (long long)v.head_dim(),
        (long long)v.intermediate, (long long)v.patch_size, (long long)v.pos_emb_h, (long long)v.pos_emb_w);
    std::printf("  projector:  2x2 merge -> %lld -> GELU -> %lld -> RMSNorm; %.2fM parameters, %s\n",
                (long long)v.merged_dim(), (long long)v.text_hidden, double(params) / 1e6,
                fmt_mib(double(bytes)).c_str());
    const image::MediaConfig mc = image::load_media_config(dir);
    const int64_t side = int64_t(mc.patch_limit_on_one_side) * mc.patch_size;
    std::printf(
        "  images:     up to %lld patches (%lld tokens) each, at most %lld px a side after resizing; media "
        "pad id %d\n",
        (long long)mc.in_patch_limit, (long long)(mc.in_patch_limit / (mc.merge_kernel_size * mc.merge_kernel_size)),
        (long long)side, v.media_pad_id);
}

// A GGUF model: the file's own description, its tensor types, and the chat template it
// carries (shown, never executed: the chat format is chosen by the architecture).
void print_gguf(const GgufModel& g) {
    const GgufFile& f = g.first();
    std::map<std::string, int64_t> types;
    for (const auto& [name, e] : g.tensors()) ++types[ggml_type_name(e.info->ggml_type)];
    std::string by;
    for (const auto& [t, n] : types) by += (by.empty() ? "" : ", ") + std::to_string(n) + " " + t;
    std::printf("\ngguf:         v%u, %zu file(s), %zu tensors (%s), alignment %llu\n", f.contents().version,
                g.parts().size(), g.tensors().size(), by.c_str(), (unsigned long long)f.contents().alignment);
    for (const char* key :
         {"general.name", "general.architecture", "general.file_type", "general.quantized_by", "tokenizer.ggml.pre"}) {
        const GgufValue* v = f.find(key);
        if (!v) continue;
        const std::string text = v->type == GgufType::kString ? v->s : std::to_string(f.get_int(key));
        std::printf("  %-22s %s\n", key, text.c_str());
    }
    if (f.has("tokenizer.chat_template")) {
        const std::string& t = f.get_string("tokenizer.chat_template");
        std::printf("chat template (tokenizer.chat_template, %zu bytes; shown, not executed):\n%s\n", t.size(),
                    t.c_str());
    }
}

}   // namespace

int cmd_inspect(int argc, char** argv) {
    ArgParser args("inspect", argc, argv);
    const std::string dir = args.required("--model");
    if (args.flag("--tensors")) {
        const bool json = args.flag("--json");
        args.done();
        return print_tensors(dir, json);
    }
    const Shard shard = parse_shard_options(args);
    const bool check_weights = !args.flag("--skip-weight-check");
    args.done();
    auto model = KimiModel::load(dir, {}, WeightMemory::kAuto, shard, check_weights);
    // Split (mpirun): each rank's part, gathered in rank order; rank 0 prints.
    std::vector<float> held_mib;
    dist::Comm::world().allgather(std::vector<float>{float(held_weight_bytes(*model) / 1048576.0)}, held_mib);
    if (shard.rank != 0) return 0;
    const ModelConfig& c = model->config();
    const ModelWeights& w = model->weights();

    std::printf("model:        %s (%s)\n", dir.c_str(), c.architecture.c_str());
    std::printf("hidden:       %lld, layers %lld, vocab %lld, rms_norm_eps %g, tied embeddings %s\n",
                (long long)c.hidden_size, (long long)c.n_layers, (long long)c.vocab_size, double(c.rms_norm_eps),
                c.tie_word_embeddings ? "yes" : "no");
    if (c.is_k3_layout())
        std::printf(
            "layout:       Kimi-K3 multimodal checkpoint; text model under text_config / %s*, vision tower at the "
            "top level\n",
            c.tensor_prefix.c_str());
    std::printf("KDA:          %lld heads x %lld, short conv %lld (%lld layers)\n", (long long)c.kda_heads,
                (long long)c.kda_head_dim, (long long)c.conv_kernel, (long long)c.n_kda_layers());
    if (c.kda_has_lower_bound)
        std::printf("  gates:      forget %g*sigmoid(exp(A)*(f+dt_bias)) (lower bound %g); output %s\n",
                    double(c.kda_gate_lower_bound), double(c.kda_gate_lower_bound),
                    c.kda_full_rank_gate ? "full-rank g_proj" : "low-rank g_a/g_b");
    else
        std::printf("  gates:      forget -exp(A)*softplus(f+dt_bias); output %s\n",
                    c.kda_full_rank_gate ? "full-rank g_proj" : "low-rank g_a/g_b");
    std::printf("MLA (NoPE):   %lld heads, nope %lld + rope %lld, v %lld, latent %lld (%lld layers)\n",
                (long long)c.mla_heads, (long long)c.qk_nope_dim, (long long)c.qk_rope_dim, (long long)c.v_head_dim,
                (long long)c.kv_lora_rank, (long long)c.n_mla_layers());
    std::printf("  query:      %s; output gate %s\n",
                c.q_lora_rank > 0 ? ("q-LoRA rank " + std::to_string(c.q_lora_rank)).c_str() : "plain q_proj",
                c.mla_output_gate ? "sigmoid(g_proj(x))" : "none");
    std::printf(
        "MoE:          %lld experts, top-%lld, %lld shared, width %lld, groups %lld/%lld, scale %g, renorm %s\n",
        (long long)c.n_experts, (long long)c.n_experts_per_token, (long long)c.n_shared_experts,
        (long long)c.moe_intermediate_size, (long long)c.topk_groups, (long long)c.n_expert_groups,
        double(c.routed_scaling_factor), c.moe_renormalize ? "yes" : "no");
    if (c.moe_latent_dim > 0)
        std::printf("  latent:     routed experts on a %lld-wide latent (down-proj -> experts -> %sup-proj)\n",
                    (long long)c.moe_latent_dim, c.moe_latent_norm ? "RMSNorm -> " : "");
    std::printf("dense MLP:    width %lld (layers < %lld)\n", (long long)c.intermediate_size,
                (long long)c.first_k_dense_replace);
    if (c.act.kind == ActKind::kSitu && c.act.linear_beta > 0)
        std::printf("activation:   SiTU (beta %g, linear beta %g)\n", double(c.act.beta), double(c.act.linear_beta));
    else if (c.act.kind == ActKind::kSitu)
        std::printf("activation:   SiTU (beta %g, up branch linear)\n", double(c.act.beta));
    else
        std::printf("activation:   SiLU\n");
    if (c.attn_res_block_size > 0)
        std::printf("residual:     Block Attention Residuals, block size %lld -> %lld blocks\n",
                    (long long)c.attn_res_block_size, (long long)c.attn_res_n_blocks());
    else
        std::printf("residual:     plain residual stream\n");

    print_vision(*model, dir);

    std::printf("\nlayer map (0-based):\n");
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const LayerWeights& l = w.layers[size_t(i)];
        std::printf("  %3lld  %-4s %s\n", (long long)i, l.kind == LayerKind::kKda ? "KDA" : "MLA",
                    l.is_moe ? "MoE" : "dense");
    }
    const double decode_bytes = decode_step_traffic(*model, 1, 0).weight_bytes;
    const int64_t file_bytes = int64_t(model->store().tensor_bytes());
    // Parameters and bytes by storage type; an MXFP4 linear's packed values and scales count as
    // one MXFP4 tensor of two parameters per packed byte.
    int64_t params = 0;
    std::map<std::string, double> bytes_by_dtype;
    for (const auto& [name, t] : model->store().all_tensors()) {
        const auto ends = [&](const char* suf) {
            const size_t n = std::strlen(suf);
            return name.size() > n && name.compare(name.size() - n, n, suf) == 0;
        };
        const bool packed = t.dtype == DType::kU8 && ends(".weight_packed"),
                   scale = t.dtype == DType::kU8 && ends(".weight_scale");
        bytes_by_dtype[packed || scale ? "MXFP4" : dtype_name(t.dtype)] += double(t.nbytes());
        params += packed ? 2 * t.numel() : scale ? 0 : t.numel();
    }
    const CacheGeometry g = model->cache_geometry(1, 1);
    std::string chat_format = "none (no tokenizer in the model directory)";
    try {
        chat_format = chat::chat_format_for(load_tokenizer_at(dir))->name();
    } catch (const Error& e) {   // no tokenizer files is "none"; broken ones are named
        if (std::filesystem::exists(dir + "/tiktoken.model") || std::filesystem::exists(dir + "/tokenizer_config.json"))
            chat_format = std::string("unreadable tokenizer: ") + e.what();
    }
    std::printf("\nparameters:   %lld (%.1f MiB of tensors in %zu file(s))\n", (long long)params,
                mib(double(file_bytes)), model->store().n_files());
    std::string by;
    for (const auto& [dt, b] : bytes_by_dtype) by += (by.empty() ? "" : ", ") + dt + " " + fmt_mib(b);
    std::printf("by dtype:     %s%s\n", by.c_str(),
                bytes_by_dtype.count("MXFP4") ? " (MXFP4: packed values + E8M0 scales)" : "");
    const auto counts = [](const std::map<std::string, int64_t>& by_kind) {
        std::string out;
        for (const auto& [kind, n] : by_kind) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
        return out;
    };
    if (c.quant.mxfp4 || !model->store().mxfp4_linears().empty()) {
        std::printf("quantization: %s; stored MXFP4: %s\n",
                    c.quant.mxfp4 ? (c.quant.where + ", mxfp4-pack-quantized").c_str() : "none",
                    model->store().mxfp4_linears().empty() ? "none" : counts(model->store().mxfp4_linears()).c_str());
        if (!model->store().dense_but_targeted().empty())
            std::printf("              targeted by the config, stored dense: %s\n",
                        counts(model->store().dense_but_targeted()).c_str());
    }
    if (model->store().n_skipped() > 0)
        std::printf("skipped:      %zu tensors, %.1f MiB (outside the text model; no vision_config to use them)\n",
                    model->store().n_skipped(), mib(double(model->store().skipped_bytes())));
    std::printf("decode read:  %.2f MiB of weights per step at batch 1 (selected experts only%s)\n", mib(decode_bytes),
                model->store().mxfp4_bytes() > 0 ? ", MXFP4 linears at their packed size" : "");
    if (shard.split()) {
        std::printf("ranks:        %d (%s parallel); weights held per rank:", shard.size,
                    shard.expert_parallel ? "expert" : "tensor");
        for (size_t r = 0; r < held_mib.size(); ++r)
            std::printf("%s rank %zu %.1f MiB", r ? "," : "", r, double(held_mib[r]));
        std::printf("\n");
    }
    std::printf("chat format:  %s\n", chat_format.c_str());
    std::printf("cache:        KDA state %.2f MiB per sequence; MLA latents %lld B per token of context\n",
                mib(double(g.bytes_per_slot())), (long long)(g.bytes_per_block() / g.block_size));
    if (const GgufModel* gg = model->store().gguf()) print_gguf(*gg);
    return 0;
}

}   // namespace kimi::app
