// The tensor manifest (see tensor_layout.h). Published dtypes: Kimi Linear stores A_log and
// dt_bias in F32 and everything else (e_score_correction_bias included) in BF16; Kimi-K3 also
// keeps the conv weights, o_norm, the router bias and the model-level norms in F32, and A_log
// as a vector padded to head_dim. Split axes follow vLLM's tensor-parallel layout
// (docs/distributed.md): column-parallel weights split their rows (axis 0), row-parallel ones
// (o_proj, down projections) their columns (axis 1).
#include "model/tensor_layout.h"

#include <algorithm>

#include "core/error.h"

namespace kimi {

bool TensorRow::is_linear() const {
    return role == TensorRole::kLinear || role == TensorRole::kRouter || role == TensorRole::kSharedExpert ||
        role == TensorRole::kRoutedExpert;
}

bool TensorRow::quantizable() const {
    return is_linear() && !vision && role != TensorRole::kRouter && shape[1] % kMxfp4Group == 0;
}

std::string TensorRow::module() const { return is_linear() ? name.substr(0, name.size() - 7) : std::string(); }

TensorLayout::TensorLayout(const ModelConfig& c) : prefix_(c.tensor_prefix) {
    const bool k3 = c.is_k3_layout();
    const DType small = k3 ? DType::kF32 : DType::kBF16;   // conv, o_norm, router bias, model-level norms
    const int64_t d = c.hidden_size;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, TensorRole role, int split,
                   DType t = DType::kBF16) {
        rows_.push_back({name, std::move(shape), t, role, split});
    };
    auto lin = [&](const std::string& module, int64_t out, int64_t in, int split,
                   TensorRole role = TensorRole::kLinear) {
        add(module + ".weight", {out, in}, role, split);
    };
    auto out_lin = [&](const std::string& module, int64_t out, int64_t in, int split,
                       TensorRole role = TensorRole::kLinear) {
        lin(module, out, in, split, role);
        rows_.back().out_proj = true;
    };
    auto norm = [&](const std::string& name, int64_t n, DType t = DType::kBF16) {
        add(name, {n}, TensorRole::kNorm, -1, t);
    };
    auto attn_res = [&](const std::string& n, DType t) {   // AttnRes score pair: norm [D] and projection [1, D]
        norm(n + "_norm.weight", d, t);
        add(n + "_proj.weight", {1, d}, TensorRole::kLinear, -1, t);
    };
    // gate/up column-parallel, down row-parallel
    auto mlp = [&](const std::string& p, int64_t in, int64_t f, const char* g, const char* u, const char* dn,
                   TensorRole role) {
        lin(p + g, f, in, 0, role);
        lin(p + u, f, in, 0, role);
        out_lin(p + dn, in, f, 1, role);
    };

    add("model.embed_tokens.weight", {c.vocab_size, d}, TensorRole::kEmbedding, 0);
    norm("model.norm.weight", d, small);
    if (c.attn_res_block_size > 0) attn_res("model.output_attn_res", small);
    if (!c.tie_word_embeddings) lin("lm_head", c.vocab_size, d, 0);
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        norm(p + "input_layernorm.weight", d);
        norm(p + "post_attention_layernorm.weight", d);
        if (c.attn_res_block_size > 0) {
            attn_res(p + "self_attention_res", DType::kBF16);
            attn_res(p + "mlp_res", DType::kBF16);
        }
        const std::string a = p + "self_attn.";
        if (c.layer_kinds[size_t(i)] == LayerKind::kKda) {
            const int64_t h = c.kda_heads, k = c.kda_head_dim, hk = h * k;
            for (const char* n : {"q_proj", "k_proj", "v_proj"}) lin(a + n, hk, d, 0);
            for (const char* n : {"q_conv1d", "k_conv1d", "v_conv1d"})
                add(a + n + ".weight", {hk, 1, c.conv_kernel}, TensorRole::kConv, 0, small);
            lin(a + "f_a_proj", k, d, -1);
            lin(a + "f_b_proj", hk, k, 0);
            add(a + "dt_bias", {hk}, TensorRole::kDtBias, 0, DType::kF32);
            if (k3)   // published as a vector padded to head_dim (the first H entries are the heads')
                add(a + "A_log", {std::max(h, k)}, TensorRole::kALog, 0, DType::kF32);
            else
                add(a + "A_log", {1, 1, h, 1}, TensorRole::kALog, 2, DType::kF32);
            lin(a + "b_proj", h, d, 0);
            if (c.kda_full_rank_gate) {
                lin(a + "g_proj", hk, d, 0);
            } else {
                lin(a + "g_a_proj", k, d, -1);
                lin(a + "g_b_proj", hk, k, 0);
            }
            norm(a + "o_norm.weight", k, small);
            out_lin(a + "o_proj", d, hk, 1);
        } else {
            const int64_t h = c.mla_heads;
            if (c.q_lora_rank > 0) {
                lin(a + "q_a_proj", c.q_lora_rank, d, -1);
                norm(a + "q_a_layernorm.weight", c.q_lora_rank);
                lin(a + "q_b_proj", h * c.mla_qk_dim(), c.q_lora_rank, 0);
            } else {
                lin(a + "q_proj", h * c.mla_qk_dim(), d, 0);
            }
            lin(a + "kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_dim, d, -1);
            norm(a + "kv_a_layernorm.weight", c.kv_lora_rank);
            lin(a + "kv_b_proj", h * (c.qk_nope_dim + c.v_head_dim), c.kv_lora_rank, 0);
            if (c.mla_output_gate) lin(a + "g_proj", h * c.v_head_dim, d, 0);
            out_lin(a + "o_proj", d, h * c.v_head_dim, 1);
        }
        if (c.is_moe_layer(i)) {
            const std::string m = p + "block_sparse_moe.";
            lin(m + "gate", c.n_experts, d, -1, TensorRole::kRouter);
            add(m + "gate.e_score_correction_bias", {c.n_experts}, TensorRole::kScoreBias, -1, small);
            const int64_t in = c.moe_expert_in_dim();
            if (c.moe_latent_dim > 0) {
                lin(m + "routed_expert_down_proj", in, d, -1);
                if (c.moe_latent_norm) norm(m + "routed_expert_norm.weight", in);
                out_lin(m + "routed_expert_up_proj", d, in, -1);
            }
            for (int64_t e = 0; e < c.n_experts; ++e)
                mlp(m + "experts." + std::to_string(e) + ".", in, c.moe_intermediate_size, "w1", "w3", "w2",
                    TensorRole::kRoutedExpert);
            if (c.n_shared_experts > 0)
                mlp(m + "shared_experts.", d, c.moe_intermediate_size * c.n_shared_experts, "gate_proj", "up_proj",
                    "down_proj", TensorRole::kSharedExpert);
        } else {
            mlp(p + "mlp.", d, c.intermediate_size, "gate_proj", "up_proj", "down_proj", TensorRole::kLinear);
        }
    }
    if (c.vision.present) add_vision(c.vision);
    for (size_t i = 0; i < rows_.size(); ++i) index_[rows_[i].name] = i;
}

// The vision tower and projector (BF16, top-level names, held whole by every rank).
void TensorLayout::add_vision(const VisionConfig& v) {
    const int64_t d = v.hidden, p = v.patch_size;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, TensorRole role) {
        rows_.push_back({name, std::move(shape), DType::kBF16, role, -1, false, true});
    };
    add("vision_tower.patch_embed.proj.weight", {d, 3, p, p}, TensorRole::kPatchEmbed);
    add("vision_tower.patch_embed.pos_emb.weight", {v.pos_emb_h, v.pos_emb_w, d}, TensorRole::kPosEmb);
    for (int64_t i = 0; i < v.n_layers; ++i) {
        const std::string b = "vision_tower.encoder.blocks." + std::to_string(i) + ".";
        add(b + "norm0.weight", {d}, TensorRole::kNorm);
        add(b + "norm1.weight", {d}, TensorRole::kNorm);
        add(b + "wqkv.weight", {3 * v.qkv_dim, d}, TensorRole::kLinear);
        add(b + "wo.weight", {d, v.qkv_dim}, TensorRole::kLinear);
        rows_.back().out_proj = true;
        add(b + "mlp.fc0.weight", {v.intermediate, d}, TensorRole::kLinear);
        add(b + "mlp.fc1.weight", {d, v.intermediate}, TensorRole::kLinear);
        rows_.back().out_proj = true;
    }
    add("vision_tower.encoder.final_layernorm.weight", {d}, TensorRole::kNorm);
    add("mm_projector.proj.0.weight", {v.merged_dim(), v.merged_dim()}, TensorRole::kLinear);
    add("mm_projector.proj.2.weight", {v.text_hidden, v.merged_dim()}, TensorRole::kLinear);
    add("mm_projector.post_norm.weight", {v.text_hidden}, TensorRole::kNorm);
}

const TensorRow* TensorLayout::find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &rows_[it->second];
}

const TensorRow& TensorLayout::at(const std::string& name) const {
    const TensorRow* r = find(name);
    if (!r) throw Error("tensor '" + prefix_ + name + "' is not part of this model's tensor layout");
    return *r;
}

}   // namespace kimi
