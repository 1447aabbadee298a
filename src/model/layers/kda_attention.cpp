// KDA layer forward (see kda_attention.h).
#include "model/layers/kda_attention.h"

#include <cmath>

#include "model/layers/attn_output.h"

namespace kimi {

Tensor kda_attention_forward(LayerContext& lc, const KdaWeights& w, int64_t kda_layer, const Tensor& x) {
    Exec& ex = lc.ex;
    Arena& a = *ex.arena;
    const Precision p = ex.precision;
    const int64_t n = x.dim(0), h = lc.cfg.kda_heads, k = lc.cfg.kda_head_dim, hk = h * k;

    Tensor q = a.alloc_f32({n, hk}), kk = a.alloc_f32({n, hk}), v = a.alloc_f32({n, hk});   // [T, H*K]
    ops::matmul(ex, x, w.q_proj, p, q);
    ops::matmul(ex, x, w.k_proj, p, kk);
    ops::matmul(ex, x, w.v_proj, p, v);
    ops::causal_conv1d_silu(ex, q, w.q_conv, lc.cache.conv_state(kda_layer, 0), lc.seqs, q);
    ops::causal_conv1d_silu(ex, kk, w.k_conv, lc.cache.conv_state(kda_layer, 1), lc.seqs, kk);
    ops::causal_conv1d_silu(ex, v, w.v_conv, lc.cache.conv_state(kda_layer, 2), lc.seqs, v);
    Tensor q3 = q.view({n, h, k}), k3 = kk.view({n, h, k}), v3 = v.view({n, h, k});   // [T, H, K]
    ops::l2_norm_heads(ex, q3, 1e-6f, 1.0f / std::sqrt(float(k)));
    ops::l2_norm_heads(ex, k3, 1e-6f, 1.0f);

    Tensor fa = a.alloc_f32({n, k}), g = a.alloc_f32({n, hk});   // forget gate, log-space
    ops::matmul(ex, x, w.f_a, p, fa);
    ops::matmul(ex, fa, w.f_b, p, g);
    if (lc.cfg.kda_has_lower_bound)
        ops::kda_gate_lower_bound(ex, g, w.neg_exp_a, w.dt_bias, lc.cfg.kda_gate_lower_bound, g);
    else
        ops::kda_gate(ex, g, w.neg_exp_a, w.dt_bias, g);
    Tensor beta = a.alloc_f32({n, h});   // [T, H]
    ops::matmul(ex, x, w.b_proj, p, beta);
    ops::sigmoid_inplace(ex, beta);

    Tensor o = a.alloc_f32({n, h, k});   // [T, H, V]
    ops::kda_recurrent(ex, q3, k3, v3, g.view({n, h, k}), beta, lc.cache.kda_state(kda_layer), lc.seqs, o);

    Tensor z = a.alloc_f32({n, hk});   // output gate logits
    if (w.g_proj.defined()) {
        ops::matmul(ex, x, w.g_proj, p, z);   // full rank (K3)
    } else {
        Tensor ga = a.alloc_f32({n, k});
        ops::matmul(ex, x, w.g_a, p, ga);
        ops::matmul(ex, ga, w.g_b, p, z);
    }
    ops::gated_rms_norm(ex, o, w.o_norm, z.view({n, h, k}), lc.cfg.rms_norm_eps, o);

    return attn_o_proj(ex, o.view({n, hk}), w.o_proj);   // [T, D]
}

}   // namespace kimi
