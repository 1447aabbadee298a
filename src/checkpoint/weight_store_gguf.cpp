// WeightStore over a GGUF model: every tensor llama.cpp's converter wrote, seen under the name
// and in the form the Hugging Face checkpoint has, so the loader binds both the same way.
// Most tensors are plain views (GGUF's ggml dimension order reversed is the PyTorch shape).
// Where the converter changed a tensor, it is undone exactly:
//   - the routed experts, stacked [E, out, in] per layer → one [out, in] view per expert;
//   - the KDA conv kernels, [1, H·K, 1, W] → [H·K, 1, W] (the same bytes);
//   - MLA's kv_b_proj, split into k_b (transposed per head) and v_b → rebuilt [H·(n+v), r]
//     (a copy: bf16 when both parts are bf16, else the exact f32 values);
//   - K3's AttnRes score vectors, stored fused (norm · proj, in f32) → norm = the fused vector,
//     proj = ones (the loader multiplies them back: an exact product);
//   - dt_bias renamed, and A_log stored as -exp(A_log): kept as is, a_log_folded() says so.
// ref: docs/gguf.md#tensors; llama.cpp conversion/kimi_linear.py, kimi_k3.py (modify_tensors).
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/weight_store.h"
#include "core/error.h"

#include <sys/stat.h>

namespace kimi {

namespace {

// blk.L.<suffix> → model.layers.L.<name> (tensors that are only renamed).
const std::map<std::string, std::string>& layer_names() {
    static const std::map<std::string, std::string> m = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"ssm_f_a.weight", "self_attn.f_a_proj.weight"},
        {"ssm_f_b.weight", "self_attn.f_b_proj.weight"},
        {"ssm_g_a.weight", "self_attn.g_a_proj.weight"},
        {"ssm_g_b.weight", "self_attn.g_b_proj.weight"},
        {"ssm_g.weight", "self_attn.g_proj.weight"},       // K3 KDA: the full-rank gate
        {"attn_gate.weight", "self_attn.g_proj.weight"},   // K3 MLA: the output gate
        {"ssm_beta.weight", "self_attn.b_proj.weight"},
        {"ssm_dt.bias", "self_attn.dt_bias"},
        {"ssm_norm.weight", "self_attn.o_norm.weight"},
        {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
        {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
        {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
        {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
        {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
        {"ffn_gate_inp.weight", "block_sparse_moe.gate.weight"},
        {"exp_probs_b.bias", "block_sparse_moe.gate.e_score_correction_bias"},
        {"ffn_gate_shexp.weight", "block_sparse_moe.shared_experts.gate_proj.weight"},
        {"ffn_up_shexp.weight", "block_sparse_moe.shared_experts.up_proj.weight"},
        {"ffn_down_shexp.weight", "block_sparse_moe.shared_experts.down_proj.weight"},
        {"ffn_routed_down.weight", "block_sparse_moe.routed_expert_down_proj.weight"},
        {"ffn_routed_up.weight", "block_sparse_moe.routed_expert_up_proj.weight"},
        {"ffn_routed_norm.weight", "block_sparse_moe.routed_expert_norm.weight"},
    };
    return m;
}

const std::map<std::string, std::string>& expert_names() {   // stacked experts → w1/w3/w2
    static const std::map<std::string, std::string> m = {
        {"ffn_gate_exps.weight", "w1"}, {"ffn_up_exps.weight", "w3"}, {"ffn_down_exps.weight", "w2"}};
    return m;
}

const std::map<std::string, std::string>& res_names() {   // fused AttnRes scores → the HF pair
    static const std::map<std::string, std::string> m = {{"attn_res_score.weight", "self_attention_res"},
                                                         {"ffn_res_score.weight", "mlp_res"}};
    return m;
}

bool is_conv(const std::string& suffix) {
    return suffix == "ssm_conv1d_q.weight" || suffix == "ssm_conv1d_k.weight" || suffix == "ssm_conv1d_v.weight";
}

// "blk.12.attn_q.weight" → (12, "attn_q.weight"); false for a model-level name.
bool split_layer_name(const std::string& name, int64_t& layer, std::string& suffix) {
    if (name.compare(0, 4, "blk.") != 0) return false;
    const size_t dot = name.find('.', 4);
    if (dot == std::string::npos || dot == 4 || dot - 4 > 6) return false;
    layer = 0;
    for (size_t i = 4; i < dot; ++i) {
        if (name[i] < '0' || name[i] > '9') return false;
        layer = layer * 10 + (name[i] - '0');
    }
    suffix = name.substr(dot + 1);
    return true;
}

}   // namespace

void WeightStore::add_fused_res(const std::string& pair, const Tensor& fused, const std::string& prefix,
                                const std::string* file) {
    if (fused.rank != 1)
        throw Error(*file + ": AttnRes score for '" + pair + "': shape " + shape_str(fused) + ", expected [D]");
    const int64_t d = fused.dim(0);
    Tensor ones = new_f32({1, d});
    for (int64_t i = 0; i < d; ++i) ones.f32()[i] = 1.0f;
    for (const auto& [name, t] : {std::pair{pair + "_norm.weight", fused}, std::pair{pair + "_proj.weight", ones}}) {
        if (tensors_.count(prefix + name)) throw Error(*file + ": two GGUF tensors map to '" + prefix + name + "'");
        tensors_[prefix + name] = Entry{t, file};
    }
}

// k_b: [H, r, n] (k part, transposed per head), v_b: [H, v, r] → kv_b_proj [H·(n + v), r].
Tensor WeightStore::join_kv_b(const Tensor& k_b, const Tensor& v_b, const std::string& where) {
    if (k_b.rank != 3 || v_b.rank != 3 || k_b.dim(0) != v_b.dim(0) || k_b.dim(1) != v_b.dim(2))
        throw Error(where + "attn_k_b " + shape_str(k_b) + " and attn_v_b " + shape_str(v_b) +
                    " do not split one kv_b_proj ([H, r, n] and [H, v, r])");
    const int64_t h = k_b.dim(0), r = k_b.dim(1), n = k_b.dim(2), v = v_b.dim(1), rows = n + v;
    const bool bf16 = k_b.dtype == DType::kBF16 && v_b.dtype == DType::kBF16;
    Tensor out = new_like(bf16 ? DType::kBF16 : DType::kF32, {h * rows, r});
    std::vector<float> kf, vf;
    if (!bf16) {   // exact values of any type
        kf.resize(size_t(k_b.numel()));
        vf.resize(size_t(v_b.numel()));
        decode_f32(k_b, kf.data());
        decode_f32(v_b, vf.data());
    }
    const auto put = [&](int64_t row, int64_t col, const Tensor& src, const std::vector<float>& f, int64_t e) {
        const int64_t o = row * r + col;
        if (bf16)
            static_cast<uint16_t*>(out.data)[o] = static_cast<const uint16_t*>(src.data)[e];
        else
            out.f32()[o] = f[size_t(e)];
    };
    for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t j = 0; j < r; ++j) {
            for (int64_t i = 0; i < n; ++i) put(hh * rows + i, j, k_b, kf, (hh * r + j) * n + i);
            for (int64_t i = 0; i < v; ++i) put(hh * rows + n + i, j, v_b, vf, (hh * v + i) * r + j);
        }
    return out;
}

void WeightStore::load_gguf(const std::string& path, WeightMemory memory,
                            const std::function<void(uint64_t, uint64_t)>& on_read) {
    uint64_t total = 0;
    for (const auto& p : gguf_split_paths(path)) {
        check_regular_file(p);
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0) total += uint64_t(st.st_size);
    }
    file_memory_ = resolve_file_memory(memory, total, memory_available_bytes(), huge_pages_available());
    gguf_ = std::make_unique<GgufModel>(path, file_memory_, on_read);
    a_log_folded_ = true;
    const std::string& first = gguf_->first().path();
    const std::string arch = gguf_->first().get_string("general.architecture");
    const std::string prefix = arch == "kimi-k3" ? "language_model." : "";

    const auto add = [&](const std::string& hf, const Tensor& t, const std::string* file) {
        const std::string full = prefix + hf;
        if (tensors_.count(full))
            throw Error(*file + ": two GGUF tensors map to '" + full + "' (e.g. ssm_g and attn_gate in one layer)");
        tensors_[full] = Entry{t, file};
    };
    // k_b / v_b halves of each MLA layer's kv_b_proj, joined once both are seen.
    std::map<int64_t, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>> kv_b;
    const std::string* kv_b_file = &first;

    for (const auto& [name, entry] : gguf_->tensors()) {
        const GgufTensorInfo& info = *entry.info;
        const std::string* file = &entry.part->path();
        const auto view = [&] {
            try {
                return info.tensor();
            } catch (const Error& e) {
                throw Error(*file + ": " + e.what());
            }
        };
        int64_t layer = -1;
        std::string suffix;
        if (!split_layer_name(name, layer, suffix)) {
            if (name == "token_embd.weight") {
                add("model.embed_tokens.weight", view(), file);
            } else if (name == "output_norm.weight") {
                add("model.norm.weight", view(), file);
            } else if (name == "output.weight") {
                add("lm_head.weight", view(), file);
            } else if (name == "output_res_score.weight") {
                add_fused_res("model.output_attn_res", view(), prefix, file);
            } else {
                tensors_[name] = Entry{view(), file};   // unknown: finish() reports it as unexpected
            }
            continue;
        }
        const std::string p = "model.layers." + std::to_string(layer) + ".";
        if (suffix == "ssm_a") {   // -exp(A_log): one value per head, in whatever rank was written
            const Tensor t = view();
            add(p + "self_attn.A_log", t.view({t.numel()}), file);
        } else if (auto it = layer_names().find(suffix); it != layer_names().end()) {
            add(p + it->second, view(), file);
        } else if (is_conv(suffix)) {
            // [1, H·K, 1, W] as the converter writes it, or squeezed ([H·K, 1, W], [H·K, W]) as
            // llama-quantize rewrites it → [H·K, 1, W]; the same bytes
            const Tensor t = view();
            int64_t non_unit = 0;
            for (int i = 0; i + 1 < t.rank; ++i) non_unit += t.dim(i) != 1;
            if (t.rank < 2 || non_unit > 1)
                throw Error(*file + ": tensor '" + name + "': shape " + shape_str(t) + ", expected [1, H*K, 1, W]");
            add(p + "self_attn." + suffix.substr(11, 1) + "_conv1d.weight",
                t.view({t.numel() / t.dim(-1), 1, t.dim(-1)}), file);
        } else if (auto e = expert_names().find(suffix); e != expert_names().end()) {
            const Tensor t = view();   // [E, out, in]
            if (t.rank != 3)
                throw Error(*file + ": tensor '" + name + "': shape " + shape_str(t) + ", expected [E, out, in]");
            for (int64_t x = 0; x < t.dim(0); ++x)
                add(p + "block_sparse_moe.experts." + std::to_string(x) + "." + e->second + ".weight",
                    t.rows(x, x + 1).view({t.dim(1), t.dim(2)}), file);
        } else if (auto r = res_names().find(suffix); r != res_names().end()) {
            add_fused_res(p + r->second, view(), prefix, file);
        } else if (suffix == "attn_k_b.weight") {
            kv_b[layer].first = &info;
            kv_b_file = file;
        } else if (suffix == "attn_v_b.weight") {
            kv_b[layer].second = &info;
        } else {
            tensors_[name] = Entry{view(), file};   // unknown: finish() reports it as unexpected
        }
    }
    for (const auto& [layer, parts] : kv_b) {
        const std::string where = first + ": layer " + std::to_string(layer) + ": ";
        if (!parts.first || !parts.second)
            throw Error(where + "has " + (parts.first ? "attn_k_b" : "attn_v_b") + " but not " +
                        (parts.first ? "attn_v_b" : "attn_k_b") + " (MLA's kv_b_proj needs both)");
        add("model.layers." + std::to_string(layer) + ".self_attn.kv_b_proj.weight",
            join_kv_b(parts.first->tensor(), parts.second->tensor(), where), kv_b_file);
    }
}

}   // namespace kimi
