// bind_weights: the one place where checkpoint tensors are checked and prepared. Each tensor's
// name, shape and split axis come from the tensor layout (tensor_layout.h).
// Preparation (exact but for the AttnRes score vectors): small vectors widened to f32,
// -exp(A_log) in f32, kv_b_proj split per head into its k part (transposed, for the absorbed
// query) and v part, and each AttnRes norm weight multiplied into its projection row (the
// pair is only ever used as that product, as llama.cpp's converter fuses it).
#include "model/model_weights.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/tensor_layout.h"

namespace kimi {

namespace {

constexpr dist::Range kWhole{0, -1};

// Reads each tensor by its tensor-layout row, addressed by slot (in `layer`, the decoder layer
// being bound): the shape checked is the layout's, and of a tensor split over ranks this rank
// keeps `part` along the layout's split axis (rows: a view; columns: a copy, see
// weight_shard.h). Replicated rows are read whole. What is kept of each row is recorded in
// `held` (ModelWeights::held).
class Binder {
public:
    Binder(const TensorLayout& layout, WeightStore& store, std::vector<Tensor>& held)
        : layout_(layout), s_(store), held_(held) {
        held_.assign(layout.rows().size(), Tensor());
    }
    WeightStore& store() { return s_; }
    int64_t layer = -1;

    // The weight of a linear as stored (dense or MXFP4); linear_dense: dequantized to BF16.
    Tensor linear(Slot s, dist::Range part = kWhole, int64_t expert = -1) {
        return read_linear(row(s, expert), part, false);
    }
    Tensor linear_dense(Slot s, dist::Range part = kWhole) { return read_linear(row(s), part, true); }
    // A norm weight, conv kernel or bias, widened to f32 (this rank's `part` of a split one).
    Tensor f32(Slot s, dist::Range part = kWhole) {
        const TensorRow& r = row(s);
        return keep(r, s_.to_f32(slice(r, s_.get(r.name, r.shape), part)));
    }
    Tensor get(Slot s) {
        const TensorRow& r = row(s);
        return keep(r, s_.get(r.name, r.shape));
    }
    Tensor any_shape(Slot s) { return keep(row(s), s_.get_any_shape(row(s).name)); }
    // What is kept of a row once prepared (another tensor, or nothing: folded into another row's).
    void hold(Slot s, const Tensor& t, int64_t expert = -1) { held_[layout_.index_of(row(s, expert))] = t; }
    const TensorRow& row(Slot s, int64_t expert = -1) const {
        const TensorRow* r = layout_.find(s, layer, expert);
        KIMI_CHECK(r, "tensor layout: no row for this slot in layer " + std::to_string(layer));
        return *r;
    }

private:
    Tensor keep(const TensorRow& r, const Tensor& t) { return held_[layout_.index_of(r)] = t; }
    Tensor read_linear(const TensorRow& r, dist::Range part, bool dense) {
        const std::string module = r.module();
        const Tensor t =
            dense ? s_.linear_dense(module, r.shape[0], r.shape[1]) : s_.linear(module, r.shape[0], r.shape[1]);
        return keep(r, slice(r, t, part));
    }
    Tensor slice(const TensorRow& r, const Tensor& t, dist::Range part) {
        if (part.end < 0) return t;
        KIMI_CHECK(r.split == 0 || r.split == 1, "tensor layout: '" + r.name + "' is not split over ranks");
        if (r.split == 1) {
            try {
                return shard_cols(s_, t, part.begin, part.end);
            } catch (const Error& e) {   // name the tensor: a block type splits only at whole blocks
                throw Error(std::string(e.what()) + " ('" + r.name + "', split over the ranks' heads or units)");
            }
        }
        return t.rank == 2 ? shard_rows(t, part.begin, part.end) : t.rows(part.begin, part.end);
    }
    const TensorLayout& layout_;
    WeightStore& s_;
    std::vector<Tensor>& held_;
};

// The three slots of a gated MLP (a dense MLP, a routed expert, the shared experts).
struct MlpSlots {
    Slot gate, up, down;
};
constexpr MlpSlots kDenseMlp{Slot::kMlpGate, Slot::kMlpUp, Slot::kMlpDown};
constexpr MlpSlots kRoutedExpert{Slot::kExpertGate, Slot::kExpertUp, Slot::kExpertDown};
constexpr MlpSlots kSharedExperts{Slot::kSharedGate, Slot::kSharedUp, Slot::kSharedDown};

// A dense MLP (or expert): gate/up column-parallel and down row-parallel over this rank's
// intermediate units (all of them unless `split`).
MlpWeights bind_mlp(Binder& b, MlpSlots slots, int64_t f, const Shard& sh, bool split = true, int64_t expert = -1) {
    const dist::Range u = split ? sh.units(f) : dist::Range{0, f};
    if (u.size() == 0)
        throw Error("tensor parallelism over " + std::to_string(sh.size) + " ranks leaves rank " +
                    std::to_string(sh.rank) + " no units of '" + b.row(slots.gate, expert).module() +
                    "' (intermediate " + std::to_string(f) + ")");
    MlpWeights m;
    m.gate = b.linear(slots.gate, u, expert);
    m.up = b.linear(slots.up, u, expert);
    m.down = b.linear(slots.down, u, expert);
    return m;
}

// This rank's heads of `n` (each rank needs at least one).
dist::Range heads_of(const Shard& sh, int64_t n, const char* kind) {
    if (n < sh.size)
        throw Error("tensor-parallel-size " + std::to_string(sh.size) + " exceeds the " + std::to_string(n) + " " +
                    kind + " heads");
    return sh.part(n);
}

KdaWeights bind_kda(const ModelConfig& c, Binder& b, const Shard& sh) {
    const int64_t h = c.kda_heads, k = c.kda_head_dim;
    const dist::Range hr = heads_of(sh, h, "KDA");
    const dist::Range rows{hr.begin * k, hr.end * k};   // this rank's rows of [H*K]
    KdaWeights a;
    a.q_proj = b.linear(Slot::kKdaQ, rows);
    a.k_proj = b.linear(Slot::kKdaK, rows);
    a.v_proj = b.linear(Slot::kKdaV, rows);
    a.q_conv = b.f32(Slot::kKdaQConv, rows);
    a.k_conv = b.f32(Slot::kKdaKConv, rows);
    a.v_conv = b.f32(Slot::kKdaVConv, rows);
    a.f_a = b.linear(Slot::kKdaFA);
    a.f_b = b.linear(Slot::kKdaFB, rows);
    a.dt_bias = b.f32(Slot::kKdaDtBias, rows);
    // A_log: [1, 1, H, 1] in Kimi Linear; a 1-D F32 vector in K3, padded beyond the H heads
    // (to head_dim): the first H entries are the real ones. Either form is accepted.
    const Tensor a_log = b.any_shape(Slot::kKdaALog);
    const bool kl_shape =
        a_log.rank == 4 && a_log.dim(0) == 1 && a_log.dim(1) == 1 && a_log.dim(2) == h && a_log.dim(3) == 1;
    if (!kl_shape && !(a_log.rank == 1 && a_log.dim(0) >= h))
        throw Error("tensor '" + c.tensor_prefix + b.row(Slot::kKdaALog).name + "': shape " + shape_str(a_log) +
                    ", expected [1, 1, " + std::to_string(h) + ", 1] or a vector of at least the " + std::to_string(h) +
                    " KDA heads (padded)" +
                    (b.store().is_gguf() ? "; llama.cpp's K3 converter keeps only attention.head_count (the MLA "
                                           "heads) of them, so this GGUF cannot hold more KDA heads than MLA heads"
                                         : ""));
    a.neg_exp_a = b.store().new_f32({hr.size()});
    // a GGUF holds -exp(A_log) itself (llama.cpp's converter folds it): taken as it is
    const bool folded = b.store().a_log_folded();
    for (int64_t i = 0; i < hr.size(); ++i) {
        const float v = element_f32(a_log, hr.begin + i);
        a.neg_exp_a.f32()[i] = folded ? v : -std::exp(v);
    }
    b.hold(Slot::kKdaALog, a.neg_exp_a);
    a.b_proj = b.linear(Slot::kKdaB, hr);
    if (c.kda_full_rank_gate) {
        a.g_proj = b.linear(Slot::kKdaG, rows);
    } else {
        a.g_a = b.linear(Slot::kKdaGA);
        a.g_b = b.linear(Slot::kKdaGB, rows);
    }
    a.o_norm = b.f32(Slot::kKdaONorm);
    a.o_proj = b.linear(Slot::kKdaO, rows);   // row-parallel: partial sums
    return a;
}

// MLA: this rank's heads (queries, the output gate, kv_b's k and v parts, o_proj's columns);
// the latent path (kv_a, its norm, q_a) is replicated.
MlaWeights bind_mla(const ModelConfig& c, Binder& b, const Shard& sh) {
    const int64_t n = c.qk_nope_dim, r = c.qk_rope_dim, v = c.v_head_dim, rank = c.kv_lora_rank;
    const dist::Range hr = heads_of(sh, c.mla_heads, "MLA");
    const int64_t h0 = hr.begin, h = hr.size();
    const dist::Range q_rows{h0 * (n + r), hr.end * (n + r)}, v_rows{h0 * v, hr.end * v};
    MlaWeights m;
    if (c.q_lora_rank > 0) {
        m.q_a = b.linear(Slot::kMlaQA);
        m.q_a_norm = b.f32(Slot::kMlaQANorm);
        m.q_b = b.linear(Slot::kMlaQB, q_rows);
    } else {
        m.q_proj = b.linear(Slot::kMlaQ, q_rows);
    }
    if (c.mla_output_gate) m.g_proj = b.linear(Slot::kMlaG, v_rows);
    const Tensor kv_a = b.linear(Slot::kMlaKvA);
    m.kv_a_c = kv_a.rows(0, rank);
    m.kv_a_rope = kv_a.rows(rank, rank + r);
    m.kv_a_norm = b.f32(Slot::kMlaKvANorm);
    // held: this dense slice, as many bytes as the w_uk_t and w_uv made from it
    const Tensor kv_b = b.linear_dense(Slot::kMlaKvB, {h0 * (n + v), hr.end * (n + v)});
    // w_uk_t[h][j][i] = kv_b[h*(n+v) + i][j]  (same dtype: a transposition is exact)
    m.w_uk_t = b.store().new_like(kv_b.dtype, {h, rank, n});
    const size_t es = dtype_size(kv_b.dtype);
    const auto* src = static_cast<const unsigned char*>(kv_b.data);
    auto* dst = static_cast<unsigned char*>(m.w_uk_t.data);
    for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < rank; ++j)
                std::memcpy(dst + size_t((hh * rank + j) * n + i) * es,
                            src + size_t((hh * (n + v) + i) * rank + j) * es, es);
    // The v rows of head hh are rows [hh*(n+v)+n, hh*(n+v)+n+v): not contiguous across heads,
    // so they are gathered once into [H, V, R].
    m.w_uv = b.store().new_like(kv_b.dtype, {h, v, rank});
    for (int64_t hh = 0; hh < h; ++hh)
        std::memcpy(static_cast<unsigned char*>(m.w_uv.data) + size_t(hh * v * rank) * es,
                    src + size_t((hh * (n + v) + n) * rank) * es, size_t(v * rank) * es);
    m.o_proj = b.linear(Slot::kMlaO, v_rows);   // row-parallel
    return m;
}

// MoE: router, score bias and the latent projections replicated; each routed expert's
// intermediate split (tensor parallel), or whole experts spread over the ranks (expert
// parallel: the others are checked but not kept); shared experts split like a dense MLP.
MoeWeights bind_moe(const ModelConfig& c, Binder& b, const Shard& sh) {
    const int64_t e = c.n_experts, f = c.moe_intermediate_size;
    MoeWeights m;
    m.router = b.linear_dense(Slot::kRouter);
    m.score_bias = b.f32(Slot::kScoreBias);
    if (c.moe_latent_dim > 0) {
        m.latent_down = b.linear(Slot::kLatentDown);
        if (c.moe_latent_norm) m.latent_norm = b.f32(Slot::kLatentNorm);
        m.latent_up = b.linear(Slot::kLatentUp);
    }
    if (sh.expert_parallel && e < sh.size)
        throw Error("expert parallelism over " + std::to_string(sh.size) + " ranks needs at least as many experts (" +
                    std::to_string(e) + ")");
    const dist::Range mine = sh.expert_parallel ? sh.part(e) : dist::Range{0, e};
    for (int64_t i = 0; i < e; ++i) {
        if (i >= mine.begin && i < mine.end) {
            m.experts.push_back(bind_mlp(b, kRoutedExpert, f, sh, !sh.expert_parallel, i));
        } else {   // another rank's expert: checked (shape, dtype), not kept
            for (Slot w : {Slot::kExpertGate, Slot::kExpertUp, Slot::kExpertDown}) {
                b.linear(w, kWhole, i);
                b.hold(w, Tensor(), i);
            }
            m.experts.emplace_back();
        }
    }
    m.has_shared = c.n_shared_experts > 0;
    if (m.has_shared) m.shared = bind_mlp(b, kSharedExperts, f * c.n_shared_experts, sh);
    return m;
}

// AttnRes score vector: the norm weight [D] times the projection [1, D], in f32 (held as the
// norm row's; the projection row keeps nothing of its own).
Tensor bind_res_score(Binder& b, Slot norm_slot, Slot proj_slot, int64_t d) {
    const Tensor norm = b.get(norm_slot);
    const Tensor proj = b.linear_dense(proj_slot);
    Tensor out = b.store().new_f32({d});
    for (int64_t i = 0; i < d; ++i) out.f32()[i] = element_f32(norm, i) * element_f32(proj, i);
    b.hold(norm_slot, out);
    b.hold(proj_slot, Tensor());
    return out;
}

}   // namespace

ModelWeights bind_weights(const ModelConfig& c, WeightStore& s, const LoadProgress& progress, const Shard& sh) {
    const int64_t d = c.hidden_size;
    s.set_quant(&c.quant);
    const TensorLayout layout(c);
    ModelWeights w;
    Binder b(layout, s, w.held);
    w.vocab = sh.part(c.vocab_size);   // vocabulary-parallel embedding and lm_head rows
    w.embed = shard_rows(b.get(Slot::kEmbed), w.vocab.begin, w.vocab.end);
    b.hold(Slot::kEmbed, w.embed);
    w.final_norm = b.f32(Slot::kFinalNorm);
    w.lm_head = c.tie_word_embeddings ? w.embed : b.linear(Slot::kLmHead, w.vocab);
    if (c.attn_res_block_size > 0)
        w.output_res_score = bind_res_score(b, Slot::kOutputResNorm, Slot::kOutputResProj, d);
    int64_t n_kda = 0, n_mla = 0;
    for (int64_t i = 0; i < c.n_layers; ++i) {
        b.layer = i;
        LayerWeights l;
        l.kind = c.layer_kinds[size_t(i)];
        l.attn_norm = b.f32(Slot::kAttnNorm);
        l.ffn_norm = b.f32(Slot::kFfnNorm);
        if (c.attn_res_block_size > 0) {
            l.attn_res_score = bind_res_score(b, Slot::kAttnResNorm, Slot::kAttnResProj, d);
            l.ffn_res_score = bind_res_score(b, Slot::kFfnResNorm, Slot::kFfnResProj, d);
        }
        if (l.kind == LayerKind::kKda) {
            l.cache_index = n_kda++;
            l.kda = bind_kda(c, b, sh);
        } else {
            l.cache_index = n_mla++;
            l.mla = bind_mla(c, b, sh);
        }
        l.is_moe = c.is_moe_layer(i);
        if (l.is_moe)
            l.moe = bind_moe(c, b, sh);
        else
            l.mlp = bind_mlp(b, kDenseMlp, c.intermediate_size, sh);
        w.layers.push_back(std::move(l));
        if (progress) progress(s.bytes_used(), s.tensor_bytes());
    }
    if (checkpoint_has_vision(layout, s)) w.vision = bind_vision(c, s, layout, w.held);
    s.finish();
    return w;
}

}   // namespace kimi
