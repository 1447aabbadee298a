// bind_weights: the one place where checkpoint tensors are checked and prepared.
// Preparation (exact but for the AttnRes score vectors): small vectors widened to f32,
// -exp(A_log) in f32, kv_b_proj split per head into its k part (transposed, for the absorbed
// query) and v part, and each AttnRes norm weight multiplied into its projection row (the
// pair is only ever used as that product, as llama.cpp's converter fuses it).
#include "model/model_weights.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace kimi {

namespace {

// A dense MLP (or expert): gate/up column-parallel and down row-parallel over this rank's
// intermediate units (all of them unless `split`).
MlpWeights bind_mlp(WeightStore& s, const std::string& p, int64_t d, int64_t f, const char* gate, const char* up,
                    const char* down, const Shard& sh, bool split = true) {
    const dist::Range u = split ? sh.units(f) : dist::Range{0, f};
    if (u.size() == 0) throw Error("tensor parallelism over " + std::to_string(sh.size) + " ranks leaves rank " +
                                   std::to_string(sh.rank) + " no units of '" + p + "' (intermediate " + std::to_string(f) + ")");
    MlpWeights m;
    m.gate = shard_rows(s.linear(p + gate, f, d), u.begin, u.end);
    m.up = shard_rows(s.linear(p + up, f, d), u.begin, u.end);
    m.down = shard_cols(s, s.linear(p + down, d, f), u.begin, u.end);
    return m;
}

// This rank's heads of `n` (each rank needs at least one).
dist::Range heads_of(const Shard& sh, int64_t n, const char* kind) {
    if (n < sh.size)
        throw Error("tensor-parallel-size " + std::to_string(sh.size) + " exceeds the " + std::to_string(n) + " " + kind + " heads");
    return sh.part(n);
}

KdaWeights bind_kda(const ModelConfig& c, WeightStore& s, const std::string& p, const Shard& sh) {
    const int64_t d = c.hidden_size, h = c.kda_heads, k = c.kda_head_dim, hk = h * k, w = c.conv_kernel;
    const dist::Range hr = heads_of(sh, h, "KDA");
    const int64_t r0 = hr.begin * k, r1 = hr.end * k, hl = hr.size() * k;   // this rank's rows of [H*K]
    KdaWeights a;
    a.q_proj = shard_rows(s.linear(p + "q_proj", hk, d), r0, r1);
    a.k_proj = shard_rows(s.linear(p + "k_proj", hk, d), r0, r1);
    a.v_proj = shard_rows(s.linear(p + "v_proj", hk, d), r0, r1);
    a.q_conv = s.to_f32(s.get(p + "q_conv1d.weight", {hk, 1, w}).rows(r0, r1), {hl, 1, w});
    a.k_conv = s.to_f32(s.get(p + "k_conv1d.weight", {hk, 1, w}).rows(r0, r1), {hl, 1, w});
    a.v_conv = s.to_f32(s.get(p + "v_conv1d.weight", {hk, 1, w}).rows(r0, r1), {hl, 1, w});
    a.f_a = s.linear(p + "f_a_proj", k, d);
    a.f_b = shard_rows(s.linear(p + "f_b_proj", hk, k), r0, r1);
    a.dt_bias = s.to_f32(s.get(p + "dt_bias", {hk}).rows(r0, r1), {hl});
    // A_log: [1, 1, H, 1] in Kimi Linear; a 1-D F32 vector in K3, padded beyond the H heads
    // (to head_dim): the first H entries are the real ones.
    const Tensor a_log = s.get_any_shape(p + "A_log");
    const bool kl_shape = a_log.rank == 4 && a_log.dim(0) == 1 && a_log.dim(1) == 1 && a_log.dim(2) == h && a_log.dim(3) == 1;
    if (!kl_shape && !(a_log.rank == 1 && a_log.dim(0) >= h))
        throw Error("tensor '" + c.tensor_prefix + p + "A_log': shape " + shape_str(a_log) + ", expected [1, 1, " + std::to_string(h) +
                    ", 1] or a vector of at least the " + std::to_string(h) + " KDA heads (padded)");
    a.neg_exp_a = s.new_f32({hr.size()});
    for (int64_t i = 0; i < hr.size(); ++i) a.neg_exp_a.f32()[i] = -std::exp(element_f32(a_log, hr.begin + i));
    a.b_proj = shard_rows(s.linear(p + "b_proj", h, d), hr.begin, hr.end);
    if (c.kda_full_rank_gate) {
        a.g_proj = shard_rows(s.linear(p + "g_proj", hk, d), r0, r1);
    } else {
        a.g_a = s.linear(p + "g_a_proj", k, d);
        a.g_b = shard_rows(s.linear(p + "g_b_proj", hk, k), r0, r1);
    }
    a.o_norm = s.to_f32(s.get(p + "o_norm.weight", {k}), {k});
    a.o_proj = shard_cols(s, s.linear(p + "o_proj", d, hk), r0, r1);   // row-parallel: partial sums
    return a;
}

// MLA: this rank's heads (queries, the output gate, kv_b's k and v parts, o_proj's columns);
// the latent path (kv_a, its norm, q_a) is replicated.
MlaWeights bind_mla(const ModelConfig& c, WeightStore& s, const std::string& p, const Shard& sh) {
    const int64_t d = c.hidden_size, h_all = c.mla_heads, n = c.qk_nope_dim, r = c.qk_rope_dim, v = c.v_head_dim;
    const int64_t rank = c.kv_lora_rank;
    const dist::Range hr = heads_of(sh, h_all, "MLA");
    const int64_t h0 = hr.begin, h = hr.size();
    MlaWeights m;
    if (c.q_lora_rank > 0) {
        const int64_t q = c.q_lora_rank;
        m.q_a = s.linear(p + "q_a_proj", q, d);
        m.q_a_norm = s.to_f32(s.get(p + "q_a_layernorm.weight", {q}), {q});
        m.q_b = shard_rows(s.linear(p + "q_b_proj", h_all * (n + r), q), h0 * (n + r), hr.end * (n + r));
    } else {
        m.q_proj = shard_rows(s.linear(p + "q_proj", h_all * (n + r), d), h0 * (n + r), hr.end * (n + r));
    }
    if (c.mla_output_gate) m.g_proj = shard_rows(s.linear(p + "g_proj", h_all * v, d), h0 * v, hr.end * v);
    const Tensor kv_a = s.linear(p + "kv_a_proj_with_mqa", rank + r, d);
    m.kv_a_c = kv_a.rows(0, rank);
    m.kv_a_rope = kv_a.rows(rank, rank + r);
    m.kv_a_norm = s.to_f32(s.get(p + "kv_a_layernorm.weight", {rank}), {rank});
    const Tensor kv_b = s.linear_dense(p + "kv_b_proj", h_all * (n + v), rank).rows(h0 * (n + v), hr.end * (n + v));
    // w_uk_t[h][j][i] = kv_b[h*(n+v) + i][j]  (same dtype: a transposition is exact)
    m.w_uk_t = s.new_like(kv_b.dtype, {h, rank, n});
    const size_t es = dtype_size(kv_b.dtype);
    const auto* src = static_cast<const unsigned char*>(kv_b.data);
    auto* dst = static_cast<unsigned char*>(m.w_uk_t.data);
    for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < rank; ++j)
                std::memcpy(dst + size_t((hh * rank + j) * n + i) * es, src + size_t((hh * (n + v) + i) * rank + j) * es, es);
    // The v rows of head hh are rows [hh*(n+v)+n, hh*(n+v)+n+v): not contiguous across heads,
    // so they are gathered once into [H, V, R].
    m.w_uv = s.new_like(kv_b.dtype, {h, v, rank});
    for (int64_t hh = 0; hh < h; ++hh)
        std::memcpy(static_cast<unsigned char*>(m.w_uv.data) + size_t(hh * v * rank) * es,
                    src + size_t((hh * (n + v) + n) * rank) * es, size_t(v * rank) * es);
    m.o_proj = shard_cols(s, s.linear(p + "o_proj", d, h_all * v), h0 * v, hr.end * v);   // row-parallel
    return m;
}

// MoE: router, score bias and the latent projections replicated; each routed expert's
// intermediate split (tensor parallel), or whole experts spread over the ranks (expert
// parallel: the others are checked but not kept); shared experts split like a dense MLP.
MoeWeights bind_moe(const ModelConfig& c, WeightStore& s, const std::string& p, const Shard& sh) {
    const int64_t d = c.hidden_size, e = c.n_experts, f = c.moe_intermediate_size, lat = c.moe_expert_in_dim();
    MoeWeights m;
    m.router = s.linear_dense(p + "gate", e, d);
    m.score_bias = s.to_f32(s.get(p + "gate.e_score_correction_bias", {e}), {e});
    if (c.moe_latent_dim > 0) {
        m.latent_down = s.linear(p + "routed_expert_down_proj", lat, d);
        if (c.moe_latent_norm) m.latent_norm = s.to_f32(s.get(p + "routed_expert_norm.weight", {lat}), {lat});
        m.latent_up = s.linear(p + "routed_expert_up_proj", d, lat);
    }
    if (sh.expert_parallel && e < sh.size)
        throw Error("expert parallelism over " + std::to_string(sh.size) + " ranks needs at least as many experts (" +
                    std::to_string(e) + ")");
    const dist::Range mine = sh.expert_parallel ? sh.part(e) : dist::Range{0, e};
    for (int64_t i = 0; i < e; ++i) {
        const std::string q = p + "experts." + std::to_string(i) + ".";
        if (i >= mine.begin && i < mine.end) {
            m.experts.push_back(bind_mlp(s, q, lat, f, "w1", "w3", "w2", sh, !sh.expert_parallel));
        } else {   // another rank's expert: checked (shape, dtype), not kept
            for (const char* w : {"w1", "w3"}) s.linear(q + w, f, lat);
            s.linear(q + "w2", lat, f);
            m.experts.emplace_back();
        }
    }
    m.has_shared = c.n_shared_experts > 0;
    if (m.has_shared)
        m.shared = bind_mlp(s, p + "shared_experts.", d, f * c.n_shared_experts, "gate_proj", "up_proj", "down_proj", sh);
    return m;
}

// AttnRes score vector: `<name>_norm.weight` [D] times `<name>_proj.weight` [1, D], in f32.
Tensor bind_res_score(WeightStore& s, const std::string& name, int64_t d) {
    const Tensor norm = s.get(name + "_norm.weight", {d});
    const Tensor proj = s.linear_dense(name + "_proj", 1, d);
    Tensor out = s.new_f32({d});
    for (int64_t i = 0; i < d; ++i) out.f32()[i] = element_f32(norm, i) * element_f32(proj, i);
    return out;
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, WeightStore& s, const LoadProgress& progress, const Shard& sh) {
    const int64_t d = c.hidden_size;
    s.set_quant(&c.quant);
    ModelWeights w;
    w.vocab = sh.part(c.vocab_size);   // vocabulary-parallel embedding and lm_head rows
    w.embed = shard_rows(s.get("model.embed_tokens.weight", {c.vocab_size, d}), w.vocab.begin, w.vocab.end);
    w.final_norm = s.to_f32(s.get("model.norm.weight", {d}), {d});
    w.lm_head = c.tie_word_embeddings ? w.embed : shard_rows(s.linear("lm_head", c.vocab_size, d), w.vocab.begin, w.vocab.end);
    if (c.attn_res_block_size > 0) w.output_res_score = bind_res_score(s, "model.output_attn_res", d);
    int64_t n_kda = 0, n_mla = 0;
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        LayerWeights l;
        l.kind = c.layer_kinds[size_t(i)];
        l.attn_norm = s.to_f32(s.get(p + "input_layernorm.weight", {d}), {d});
        l.ffn_norm = s.to_f32(s.get(p + "post_attention_layernorm.weight", {d}), {d});
        if (c.attn_res_block_size > 0) {
            l.attn_res_score = bind_res_score(s, p + "self_attention_res", d);
            l.ffn_res_score = bind_res_score(s, p + "mlp_res", d);
        }
        if (l.kind == LayerKind::kKda) {
            l.cache_index = n_kda++;
            l.kda = bind_kda(c, s, p + "self_attn.", sh);
        } else {
            l.cache_index = n_mla++;
            l.mla = bind_mla(c, s, p + "self_attn.", sh);
        }
        l.is_moe = c.is_moe_layer(i);
        if (l.is_moe)
            l.moe = bind_moe(c, s, p + "block_sparse_moe.", sh);
        else
            l.mlp = bind_mlp(s, p + "mlp.", d, c.intermediate_size, "gate_proj", "up_proj", "down_proj", sh);
        w.layers.push_back(std::move(l));
        if (progress) progress(s.bytes_used(), s.tensor_bytes());
    }
    s.finish();
    return w;
}

}  // namespace kimi
