// StepTraffic (see step_traffic.h).
#include "runtime/step_traffic.h"

#include <algorithm>
#include <cmath>

namespace kimi {

namespace {
// Bytes a product reads from the weight (MXFP4: packed values plus one scale byte per 32).
double bytes_of(const Tensor& t) {
    return double(t.nbytes()) + (t.dtype == DType::kMXFP4 ? double(t.numel()) / double(kMxfp4Group) : 0.0);
}
double elems_of(const Tensor& t) { return double(t.numel()); }
double mlp_bytes(const MlpWeights& m) { return bytes_of(m.gate) + bytes_of(m.up) + bytes_of(m.down); }
double mlp_elems(const MlpWeights& m) { return elems_of(m.gate) + elems_of(m.up) + elems_of(m.down); }
// Adds the bytes and multiply-adds (per token) of every defined tensor of the list.
void add_all(StepTraffic& t, std::initializer_list<const Tensor*> xs) {
    for (const Tensor* x : xs) {
        if (!x->defined()) continue;
        t.weight_bytes += bytes_of(*x);
        t.macs_per_token += elems_of(*x);
    }
}
}   // namespace

StepTraffic decode_step_traffic(const KimiModel& model, int64_t batch, int64_t context, bool latent_bf16) {
    const ModelConfig& c = model.config();
    const ModelWeights& w = model.weights();
    StepTraffic t;
    t.weight_bytes = bytes_of(w.lm_head) + bytes_of(w.final_norm) +
        double(batch) * double(w.embed.nbytes()) / double(std::max<int64_t>(w.embed.dim(0), 1));   // rows read
    t.head_macs = elems_of(w.lm_head);
    t.macs_per_token = t.head_macs;
    for (const LayerWeights& l : w.layers) {
        if (l.kind == LayerKind::kKda) {
            const KdaWeights& a = l.kda;
            add_all(t,
                    {&a.q_proj, &a.k_proj, &a.v_proj, &a.f_a, &a.f_b, &a.b_proj, &a.g_a, &a.g_b, &a.g_proj, &a.o_proj});
        } else {
            const MlaWeights& a = l.mla;
            add_all(t, {&a.q_proj, &a.q_a, &a.q_b, &a.kv_a_c, &a.kv_a_rope, &a.w_uk_t, &a.w_uv, &a.g_proj, &a.o_proj});
        }
        if (l.is_moe) {
            // this rank's experts (all of them unless expert parallel), each selected with
            // probability k/E per token
            const MlpWeights* one = nullptr;
            double mine = 0;
            for (const MlpWeights& x : l.moe.experts)
                if (x.gate.defined()) one = one ? one : &x, mine += 1;
            const double e = double(c.n_experts), k = double(c.n_experts_per_token);
            const double touched = mine * (1.0 - std::pow(1.0 - k / e, double(batch)));
            t.weight_bytes += bytes_of(l.moe.router) + (one ? touched * mlp_bytes(*one) : 0.0) +
                (l.moe.has_shared ? mlp_bytes(l.moe.shared) : 0.0);
            t.macs_per_token += elems_of(l.moe.router) + (one ? k * mine / e * mlp_elems(*one) : 0.0) +
                (l.moe.has_shared ? mlp_elems(l.moe.shared) : 0.0);
            add_all(t, {&l.moe.latent_down, &l.moe.latent_up});
        } else {
            t.weight_bytes += mlp_bytes(l.mlp);
            t.macs_per_token += mlp_elems(l.mlp);
        }
    }
    const CacheGeometry g = model.cache_geometry(1, 1, 16, latent_bf16);
    t.cache_bytes = double(batch) *
        (2.0 * double(g.bytes_per_slot()) + double(context) * double(g.bytes_per_block()) / double(g.block_size));
    return t;
}

double attention_macs(const KimiModel& model, int64_t n_tokens, int64_t context) {
    const ModelConfig& c = model.config();
    const double n = double(n_tokens);
    // sum over the prompt's tokens of the positions each attends: context + 1 … context + n
    const double positions = n * double(context) + n * (n + 1) / 2;
    const double mla =
        double(c.n_mla_layers()) * double(c.mla_heads) * double(c.mla_latent_width() + c.kv_lora_rank) * positions;
    const double kda =
        double(c.n_kda_layers()) * double(c.kda_heads) * 3.0 * double(c.kda_head_dim) * double(c.kda_head_dim) * n;
    return mla + kda;
}

double held_weight_bytes(const KimiModel& model) {
    const ModelWeights& w = model.weights();
    double b = 0;
    const auto add = [&b](std::initializer_list<const Tensor*> xs) {
        for (const Tensor* x : xs)
            if (x->defined()) b += bytes_of(*x);
    };
    const auto add_mlp = [&add](const MlpWeights& m) { add({&m.gate, &m.up, &m.down}); };
    add({&w.embed, &w.final_norm, &w.output_res_score});
    if (w.lm_head.data != w.embed.data) add({&w.lm_head});
    for (const LayerWeights& l : w.layers) {
        add({&l.attn_norm, &l.ffn_norm, &l.attn_res_score, &l.ffn_res_score});
        const KdaWeights& k = l.kda;
        add({&k.q_proj, &k.k_proj, &k.v_proj, &k.q_conv, &k.k_conv, &k.v_conv, &k.f_a, &k.f_b, &k.dt_bias, &k.neg_exp_a,
             &k.b_proj, &k.g_a, &k.g_b, &k.g_proj, &k.o_norm, &k.o_proj});
        const MlaWeights& a = l.mla;
        add({&a.q_proj, &a.q_a, &a.q_a_norm, &a.q_b, &a.g_proj, &a.kv_a_c, &a.kv_a_rope, &a.kv_a_norm, &a.w_uk_t,
             &a.w_uv, &a.o_proj});
        add_mlp(l.mlp);
        add({&l.moe.router, &l.moe.score_bias, &l.moe.latent_down, &l.moe.latent_norm, &l.moe.latent_up});
        for (const MlpWeights& x : l.moe.experts) add_mlp(x);
        add_mlp(l.moe.shared);
    }
    return b;
}

}   // namespace kimi
