// The tensor manifest (see tensor_layout.h). Published dtypes: Kimi Linear stores A_log and
// dt_bias in F32 and everything else (e_score_correction_bias included) in BF16; Kimi-K3 also
// keeps the conv weights, o_norm, the router bias and the model-level norms in F32, and A_log
// as a vector padded to head_dim. Split axes follow vLLM's tensor-parallel layout
// (docs/distributed.md): column-parallel weights split their rows (axis 0), row-parallel ones
// (o_proj, down projections) their columns (axis 1).
#include "model/tensor_layout.h"

#include <algorithm>
#include <functional>
#include <tuple>

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

namespace {
bool is_expert_slot(Slot s) { return s == Slot::kExpertGate || s == Slot::kExpertUp || s == Slot::kExpertDown; }
bool is_block_slot(Slot s) { return s >= Slot::kVisNorm0 && s <= Slot::kVisFc1; }
std::string blk(int64_t i) { return "blk." + std::to_string(i) + "."; }
}   // namespace

TensorRow& TensorLayout::add(Slot s, std::string name, std::vector<int64_t> shape, TensorRole role, int split, DType t,
                             std::string gguf, GgufForm form) {
    TensorRow r;
    r.name = std::move(name);
    r.shape = std::move(shape);
    r.dtype = t;
    r.role = role;
    r.split = split;
    r.slot = s;
    r.layer = layer_;
    r.gguf = std::move(gguf);
    r.gguf_form = r.gguf.empty() ? GgufForm::kNone : form;
    SlotRows& slots = is_block_slot(s) ? block_slots_[size_t(layer_)]
        : layer_ >= 0                  ? layer_slots_[size_t(layer_)]
                                       : model_slots_;
    if (slots[size_t(s)] < 0) slots[size_t(s)] = int32_t(rows_.size());   // a routed expert: expert 0's row
    rows_.push_back(std::move(r));
    return rows_.back();
}

TensorLayout::TensorLayout(const ModelConfig& c) : prefix_(c.tensor_prefix) {
    small_ = c.is_k3_layout() ? DType::kF32 : DType::kBF16;
    model_slots_.fill(-1);
    SlotRows none;
    none.fill(-1);
    layer_slots_.assign(size_t(c.n_layers), none);
    block_slots_.assign(size_t(c.vision.present ? c.vision.n_layers : 0), none);
    const int64_t d = c.hidden_size;
    add(Slot::kEmbed, "model.embed_tokens.weight", {c.vocab_size, d}, TensorRole::kEmbedding, 0, DType::kBF16,
        "token_embd.weight");
    add(Slot::kFinalNorm, "model.norm.weight", {d}, TensorRole::kNorm, -1, small_, "output_norm.weight");
    if (c.attn_res_block_size > 0) {   // AttnRes score pair: norm [D] and projection [1, D]
        add(Slot::kOutputResNorm, "model.output_attn_res_norm.weight", {d}, TensorRole::kNorm, -1, small_,
            "output_res_score.weight", GgufForm::kFusedAttnRes);
        add(Slot::kOutputResProj, "model.output_attn_res_proj.weight", {1, d}, TensorRole::kLinear, -1, small_,
            "output_res_score.weight", GgufForm::kFusedAttnRes);
    }
    if (!c.tie_word_embeddings)
        add(Slot::kLmHead, "lm_head.weight", {c.vocab_size, d}, TensorRole::kLinear, 0, DType::kBF16, "output.weight");
    for (int64_t i = 0; i < c.n_layers; ++i) add_layer(c, i);
    layer_ = -1;
    if (c.vision.present) add_vision(c.vision);
    for (size_t i = 0; i < rows_.size(); ++i) index_[rows_[i].name] = i;
}

void TensorLayout::add_layer(const ModelConfig& c, int64_t i) {
    layer_ = i;
    const int64_t d = c.hidden_size;
    const std::string p = "model.layers." + std::to_string(i) + ".", g = blk(i);
    add(Slot::kAttnNorm, p + "input_layernorm.weight", {d}, TensorRole::kNorm, -1, DType::kBF16,
        g + "attn_norm.weight");
    add(Slot::kFfnNorm, p + "post_attention_layernorm.weight", {d}, TensorRole::kNorm, -1, DType::kBF16,
        g + "ffn_norm.weight");
    if (c.attn_res_block_size > 0) {   // stored fused in a GGUF: the norm row is the product, the proj row ones
        const auto pair = [&](Slot norm, Slot proj, const std::string& n, const std::string& fused) {
            add(norm, p + n + "_norm.weight", {d}, TensorRole::kNorm, -1, DType::kBF16, g + fused,
                GgufForm::kFusedAttnRes);
            add(proj, p + n + "_proj.weight", {1, d}, TensorRole::kLinear, -1, DType::kBF16, g + fused,
                GgufForm::kFusedAttnRes);
        };
        pair(Slot::kAttnResNorm, Slot::kAttnResProj, "self_attention_res", "attn_res_score.weight");
        pair(Slot::kFfnResNorm, Slot::kFfnResProj, "mlp_res", "ffn_res_score.weight");
    }
    if (c.layer_kinds[size_t(i)] == LayerKind::kKda)
        add_kda(c, p + "self_attn.", g);
    else
        add_mla(c, p + "self_attn.", g);
    if (c.is_moe_layer(i)) {
        add_moe(c, p + "block_sparse_moe.", g);
    } else {   // gate/up column-parallel, down row-parallel
        const int64_t f = c.intermediate_size;
        add(Slot::kMlpGate, p + "mlp.gate_proj.weight", {f, d}, TensorRole::kLinear, 0, DType::kBF16,
            g + "ffn_gate.weight");
        add(Slot::kMlpUp, p + "mlp.up_proj.weight", {f, d}, TensorRole::kLinear, 0, DType::kBF16, g + "ffn_up.weight");
        add(Slot::kMlpDown, p + "mlp.down_proj.weight", {d, f}, TensorRole::kLinear, 1, DType::kBF16,
            g + "ffn_down.weight")
            .out_proj = true;
    }
}

void TensorLayout::add_kda(const ModelConfig& c, const std::string& a, const std::string& g) {
    const int64_t d = c.hidden_size, h = c.kda_heads, k = c.kda_head_dim, hk = h * k;
    const auto lin = [&](Slot s, const char* n, int64_t out, int64_t in, int split, const char* gg) {
        return std::ref(add(s, a + n + ".weight", {out, in}, TensorRole::kLinear, split, DType::kBF16, g + gg));
    };
    lin(Slot::kKdaQ, "q_proj", hk, d, 0, "attn_q.weight");
    lin(Slot::kKdaK, "k_proj", hk, d, 0, "attn_k.weight");
    lin(Slot::kKdaV, "v_proj", hk, d, 0, "attn_v.weight");
    for (const auto& [s, n, gg] : {std::tuple{Slot::kKdaQConv, "q_conv1d", "ssm_conv1d_q"},
                                   std::tuple{Slot::kKdaKConv, "k_conv1d", "ssm_conv1d_k"},
                                   std::tuple{Slot::kKdaVConv, "v_conv1d", "ssm_conv1d_v"}})
        add(s, a + n + ".weight", {hk, 1, c.conv_kernel}, TensorRole::kConv, 0, small_, g + gg + ".weight",
            GgufForm::kSqueezedConv);
    lin(Slot::kKdaFA, "f_a_proj", k, d, -1, "ssm_f_a.weight");
    lin(Slot::kKdaFB, "f_b_proj", hk, k, 0, "ssm_f_b.weight");
    add(Slot::kKdaDtBias, a + "dt_bias", {hk}, TensorRole::kDtBias, 0, DType::kF32, g + "ssm_dt.bias");
    if (c.is_k3_layout())   // published as a vector padded to head_dim (the first H entries are the heads')
        add(Slot::kKdaALog, a + "A_log", {std::max(h, k)}, TensorRole::kALog, 0, DType::kF32, g + "ssm_a",
            GgufForm::kFoldedALog);
    else
        add(Slot::kKdaALog, a + "A_log", {1, 1, h, 1}, TensorRole::kALog, 2, DType::kF32, g + "ssm_a",
            GgufForm::kFoldedALog);
    lin(Slot::kKdaB, "b_proj", h, d, 0, "ssm_beta.weight");
    if (c.kda_full_rank_gate) {
        lin(Slot::kKdaG, "g_proj", hk, d, 0, "ssm_g.weight");
    } else {
        lin(Slot::kKdaGA, "g_a_proj", k, d, -1, "ssm_g_a.weight");
        lin(Slot::kKdaGB, "g_b_proj", hk, k, 0, "ssm_g_b.weight");
    }
    add(Slot::kKdaONorm, a + "o_norm.weight", {k}, TensorRole::kNorm, -1, small_, g + "ssm_norm.weight");
    lin(Slot::kKdaO, "o_proj", d, hk, 1, "attn_output.weight").get().out_proj = true;
}

void TensorLayout::add_mla(const ModelConfig& c, const std::string& a, const std::string& g) {
    const int64_t d = c.hidden_size, h = c.mla_heads, q = c.q_lora_rank, r = c.kv_lora_rank;
    const auto lin = [&](Slot s, const char* n, int64_t out, int64_t in, int split, const char* gg) {
        return std::ref(add(s, a + n + ".weight", {out, in}, TensorRole::kLinear, split, DType::kBF16, g + gg));
    };
    const auto norm = [&](Slot s, const char* n, int64_t width, const char* gg) {
        add(s, a + n + ".weight", {width}, TensorRole::kNorm, -1, DType::kBF16, g + gg);
    };
    if (q > 0) {
        lin(Slot::kMlaQA, "q_a_proj", q, d, -1, "attn_q_a.weight");
        norm(Slot::kMlaQANorm, "q_a_layernorm", q, "attn_q_a_norm.weight");
        lin(Slot::kMlaQB, "q_b_proj", h * c.mla_qk_dim(), q, 0, "attn_q_b.weight");
    } else {
        lin(Slot::kMlaQ, "q_proj", h * c.mla_qk_dim(), d, 0, "attn_q.weight");
    }
    lin(Slot::kMlaKvA, "kv_a_proj_with_mqa", r + c.qk_rope_dim, d, -1, "attn_kv_a_mqa.weight");
    norm(Slot::kMlaKvANorm, "kv_a_layernorm", r, "attn_kv_a_norm.weight");
    TensorRow& kv_b = add(Slot::kMlaKvB, a + "kv_b_proj.weight", {h * (c.qk_nope_dim + c.v_head_dim), r},
                          TensorRole::kLinear, 0, DType::kBF16, g + "attn_k_b.weight", GgufForm::kSplitKvB);
    kv_b.gguf_v = g + "attn_v_b.weight";
    if (c.mla_output_gate) lin(Slot::kMlaG, "g_proj", h * c.v_head_dim, d, 0, "attn_gate.weight");
    lin(Slot::kMlaO, "o_proj", d, h * c.v_head_dim, 1, "attn_output.weight").get().out_proj = true;
}

// Router, score bias and latent projections replicated; each expert's gate/up column-parallel
// and down row-parallel (stacked per layer in a GGUF), the shared experts likewise.
void TensorLayout::add_moe(const ModelConfig& c, const std::string& m, const std::string& g) {
    const int64_t d = c.hidden_size, in = c.moe_expert_in_dim(), f = c.moe_intermediate_size;
    add(Slot::kRouter, m + "gate.weight", {c.n_experts, d}, TensorRole::kRouter, -1, DType::kBF16,
        g + "ffn_gate_inp.weight");
    add(Slot::kScoreBias, m + "gate.e_score_correction_bias", {c.n_experts}, TensorRole::kScoreBias, -1, small_,
        g + "exp_probs_b.bias");
    if (c.moe_latent_dim > 0) {
        add(Slot::kLatentDown, m + "routed_expert_down_proj.weight", {in, d}, TensorRole::kLinear, -1, DType::kBF16,
            g + "ffn_routed_down.weight");
        if (c.moe_latent_norm)
            add(Slot::kLatentNorm, m + "routed_expert_norm.weight", {in}, TensorRole::kNorm, -1, DType::kBF16,
                g + "ffn_routed_norm.weight");
        add(Slot::kLatentUp, m + "routed_expert_up_proj.weight", {d, in}, TensorRole::kLinear, -1, DType::kBF16,
            g + "ffn_routed_up.weight")
            .out_proj = true;
    }
    for (int64_t e = 0; e < c.n_experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        const auto expert = [&](Slot s, const char* n, int64_t out, int64_t width, int split, const char* gg) {
            TensorRow& r = add(s, x + n + ".weight", {out, width}, TensorRole::kRoutedExpert, split, DType::kBF16,
                               g + gg, GgufForm::kStackedExpert);
            r.expert = e;
            r.out_proj = split == 1;
        };
        expert(Slot::kExpertGate, "w1", f, in, 0, "ffn_gate_exps.weight");
        expert(Slot::kExpertUp, "w3", f, in, 0, "ffn_up_exps.weight");
        expert(Slot::kExpertDown, "w2", in, f, 1, "ffn_down_exps.weight");
    }
    if (c.n_shared_experts > 0) {
        const int64_t fs = f * c.n_shared_experts;
        const std::string s = m + "shared_experts.";
        add(Slot::kSharedGate, s + "gate_proj.weight", {fs, d}, TensorRole::kSharedExpert, 0, DType::kBF16,
            g + "ffn_gate_shexp.weight");
        add(Slot::kSharedUp, s + "up_proj.weight", {fs, d}, TensorRole::kSharedExpert, 0, DType::kBF16,
            g + "ffn_up_shexp.weight");
        add(Slot::kSharedDown, s + "down_proj.weight", {d, fs}, TensorRole::kSharedExpert, 1, DType::kBF16,
            g + "ffn_down_shexp.weight")
            .out_proj = true;
    }
}

// The vision tower and projector (BF16, top-level names, held whole by every rank; not in a
// GGUF: llama.cpp keeps a tower in a separate mmproj file).
void TensorLayout::add_vision(const VisionConfig& v) {
    const int64_t d = v.hidden, p = v.patch_size;
    const auto vis = [&](Slot s, const std::string& name, std::vector<int64_t> shape, TensorRole role) {
        TensorRow& r = add(s, name, std::move(shape), role, -1, DType::kBF16, "");
        r.vision = true;
        return std::ref(r);
    };
    vis(Slot::kPatchEmbed, "vision_tower.patch_embed.proj.weight", {d, 3, p, p}, TensorRole::kPatchEmbed);
    vis(Slot::kPosEmb, "vision_tower.patch_embed.pos_emb.weight", {v.pos_emb_h, v.pos_emb_w, d}, TensorRole::kPosEmb);
    for (int64_t i = 0; i < v.n_layers; ++i) {
        layer_ = i;
        const std::string b = "vision_tower.encoder.blocks." + std::to_string(i) + ".";
        vis(Slot::kVisNorm0, b + "norm0.weight", {d}, TensorRole::kNorm);
        vis(Slot::kVisNorm1, b + "norm1.weight", {d}, TensorRole::kNorm);
        vis(Slot::kVisQkv, b + "wqkv.weight", {3 * v.qkv_dim, d}, TensorRole::kLinear);
        vis(Slot::kVisO, b + "wo.weight", {d, v.qkv_dim}, TensorRole::kLinear).get().out_proj = true;
        vis(Slot::kVisFc0, b + "mlp.fc0.weight", {v.intermediate, d}, TensorRole::kLinear);
        vis(Slot::kVisFc1, b + "mlp.fc1.weight", {d, v.intermediate}, TensorRole::kLinear).get().out_proj = true;
    }
    layer_ = -1;
    vis(Slot::kVisFinalNorm, "vision_tower.encoder.final_layernorm.weight", {d}, TensorRole::kNorm);
    vis(Slot::kProj0, "mm_projector.proj.0.weight", {v.merged_dim(), v.merged_dim()}, TensorRole::kLinear);
    vis(Slot::kProj2, "mm_projector.proj.2.weight", {v.text_hidden, v.merged_dim()}, TensorRole::kLinear);
    vis(Slot::kProjPostNorm, "mm_projector.post_norm.weight", {v.text_hidden}, TensorRole::kNorm);
}

const TensorRow* TensorLayout::find(Slot slot, int64_t layer, int64_t expert) const {
    const std::vector<SlotRows>& per = is_block_slot(slot) ? block_slots_ : layer_slots_;
    if (layer >= int64_t(per.size())) return nullptr;
    const int32_t i = (layer < 0 ? model_slots_ : per[size_t(layer)])[size_t(slot)];
    if (i < 0) return nullptr;
    if (!is_expert_slot(slot)) return &rows_[size_t(i)];
    const size_t r = size_t(i) + 3 * size_t(std::max<int64_t>(expert, 0));   // w1, w3, w2 per expert, in order
    return r < rows_.size() && rows_[r].slot == slot && rows_[r].expert == expert && rows_[r].layer == layer ? &rows_[r]
                                                                                                             : nullptr;
}

std::vector<GgufSource> TensorLayout::gguf_sources() const {
    std::vector<GgufSource> out;
    out.reserve(rows_.size());
    for (const TensorRow& r : rows_)
        if (r.gguf_form != GgufForm::kNone)
            out.push_back({full_name(r), r.gguf, r.gguf_v, r.gguf_form,
                           r.gguf_form == GgufForm::kStackedExpert      ? r.expert
                               : r.gguf_form == GgufForm::kFusedAttnRes ? int64_t(r.role == TensorRole::kNorm ? 0 : 1)
                                                                        : -1});
    return out;
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
