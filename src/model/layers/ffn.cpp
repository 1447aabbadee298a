// Dense MLP and MoE forward (see ffn.h).
#include "model/layers/ffn.h"

#include <cstring>

namespace kimi {

namespace {
// g = act(g, u) in place.
void gated_act(Exec& ex, const Activation& act, Tensor& g, const Tensor& u) {
    if (act.kind == ActKind::kSitu)
        ops::situ_mul(ex, g, u, act.beta, act.linear_beta, g);
    else
        ops::silu_mul(ex, g, u, g);
}
}   // namespace

Tensor mlp_forward(Exec& ex, const Activation& act, const MlpWeights& w, const Tensor& x) {
    Arena& a = *ex.arena;
    const int64_t n = x.dim(0), f = w.gate.dim(0);
    Tensor g = a.alloc_f32({n, f}), u = a.alloc_f32({n, f});   // [T, F]
    ops::matmul(ex, x, w.gate, ex.precision, g);
    ops::matmul(ex, x, w.up, ex.precision, u);
    gated_act(ex, act, g, u);
    Tensor y = a.alloc_f32({n, w.down.dim(0)});   // [T, D]
    ops::matmul(ex, g, w.down, ex.precision, y);
    return y;
}

Tensor moe_forward(Exec& ex, const ModelConfig& c, const MoeWeights& w, const Tensor& x, dist::Comm* comm) {
    Arena& a = *ex.arena;
    const int64_t n = x.dim(0), d = x.dim(1), n_exp = c.n_experts, k = c.n_experts_per_token;
    const int64_t in = c.moe_expert_in_dim();   // D, or the latent width

    // why: router logits in f32 (weights widened, activations unrounded) as the reference,
    // so near-tied expert choices match it.
    Tensor logits = a.alloc_f32({n, n_exp});   // [T, E]
    ops::matmul(ex, x, w.router, Precision::kF32, logits);
    Tensor ids = a.alloc(DType::kI32, {n, k}), wts = a.alloc_f32({n, k});   // [T, A]
    ops::RouteParams rp;
    rp.top_k = int32_t(k);
    rp.n_groups = int32_t(c.n_expert_groups);
    rp.topk_groups = int32_t(c.topk_groups);
    rp.renormalize = c.moe_renormalize;
    rp.scale = c.routed_scaling_factor;
    ops::moe_route(ex, logits, w.score_bias, rp, ids, wts);

    // Group the (token, slot) pairs by expert (this rank's experts only) and gather their inputs.
    Tensor xe = x;   // [T, In] the experts' input
    if (w.latent_down.defined()) {
        xe = a.alloc_f32({n, in});
        ops::matmul(ex, x, w.latent_down, ex.precision, xe);
    }
    auto* local = static_cast<uint8_t*>(a.alloc_bytes(size_t(n_exp)));
    for (int64_t e = 0; e < n_exp; ++e) local[e] = w.experts[size_t(e)].gate.defined() ? 1 : 0;
    Tensor starts_t = a.alloc(DType::kI32, {n_exp + 1}), row_of = a.alloc(DType::kI32, {n, k});
    Tensor xg = a.alloc_f32({n * k, in});   // [M ≤ T·A, In] grouped by expert
    ops::moe_dispatch(ex, xe, ids, std::span<const uint8_t>(local, size_t(n_exp)), starts_t, row_of, xg);
    const int32_t* start = starts_t.i32();
    const int64_t m = start[n_exp];   // pairs this rank computes
    xg.shape[0] = m;
    // Every expert's MLP at once: one parallel pass per product over (expert, column block),
    // instead of three per expert (few tokens each at decode).
    const Tensor** gate = static_cast<const Tensor**>(a.alloc_bytes(size_t(3 * n_exp) * sizeof(Tensor*)));
    const Tensor** up = gate + n_exp;
    const Tensor** down = up + n_exp;
    for (int64_t e = 0; e < n_exp; ++e) {
        gate[e] = &w.experts[size_t(e)].gate;
        up[e] = &w.experts[size_t(e)].up;
        down[e] = &w.experts[size_t(e)].down;
    }
    const std::span<const int32_t> starts(start, size_t(n_exp + 1));
    int64_t f = 0;   // this rank's intermediate width
    for (const MlpWeights& e : w.experts) f = e.gate.defined() ? e.gate.dim(0) : f;
    Tensor g = a.alloc_f32({m, f}), u = a.alloc_f32({m, f});   // [M, F]
    ops::matmul_grouped(ex, xg, std::span<const Tensor* const>(gate, size_t(n_exp)), starts, ex.precision, g);
    ops::matmul_grouped(ex, xg, std::span<const Tensor* const>(up, size_t(n_exp)), starts, ex.precision, u);
    gated_act(ex, c.act, g, u);
    Tensor yg = a.alloc_f32({m, in});   // [M, In]
    ops::matmul_grouped(ex, g, std::span<const Tensor* const>(down, size_t(n_exp)), starts, ex.precision, yg);

    // Each token's routed sum in its own selection order.
    Tensor routed = a.alloc_f32({n, in});   // [T, In]
    ops::moe_combine(ex, yg, row_of, wts, routed);
    Tensor y = routed;   // [T, D]
    if (w.latent_up.defined()) {
        if (comm) comm->allreduce_sum({routed.f32(), size_t(routed.numel())});   // the whole sum before the norm
        if (w.latent_norm.defined()) ops::rms_norm(ex, routed, w.latent_norm, c.rms_norm_eps, routed);
        y = a.alloc_f32({n, d});
        ops::matmul(ex, routed, w.latent_up, ex.precision, y);   // replicated: the whole result
        if (w.has_shared) {
            Tensor sh = mlp_forward(ex, c.act, w.shared, x);
            if (comm) comm->allreduce_sum({sh.f32(), size_t(sh.numel())});
            ops::add_inplace(ex, y, sh);
        }
        return y;
    }
    if (w.has_shared) ops::add_inplace(ex, y, mlp_forward(ex, c.act, w.shared, x));
    if (comm) comm->allreduce_sum({y.f32(), size_t(y.numel())});   // routed + shared partial sums
    return y;
}

}   // namespace kimi
