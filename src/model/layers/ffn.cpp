// Dense MLP and MoE forward (see ffn.h).
#include "model/layers/ffn.h"

#include <cstring>

namespace kimi {

void mlp_forward_into(Exec& ex, const MlpWeights& w, const Tensor& x, Tensor& y) {
    Arena& a = *ex.arena;
    const int64_t n = x.dim(0), f = w.gate.dim(0);
    Tensor g = a.alloc_f32({n, f}), u = a.alloc_f32({n, f});   // [T, F]
    ops::matmul(ex, x, w.gate, ex.precision, g);
    ops::matmul(ex, x, w.up, ex.precision, u);
    ops::silu_mul(ex, g, u, g);
    ops::matmul(ex, g, w.down, ex.precision, y);
}

Tensor mlp_forward(Exec& ex, const MlpWeights& w, const Tensor& x) {
    Tensor y = ex.arena->alloc_f32({x.dim(0), w.down.dim(0)});   // [T, D]
    mlp_forward_into(ex, w, x, y);
    return y;
}

Tensor moe_forward(Exec& ex, const ModelConfig& c, const MoeWeights& w, const Tensor& x) {
    Arena& a = *ex.arena;
    const int64_t n = x.dim(0), d = x.dim(1), n_exp = c.n_experts, k = c.n_experts_per_token;

    // why: router logits in f32 (weights widened, activations unrounded) as the reference,
    // so near-tied expert choices match it.
    Tensor logits = a.alloc_f32({n, n_exp});                   // [T, E]
    ops::matmul(ex, x, w.router, Precision::kF32, logits);
    Tensor ids = a.alloc(DType::kI32, {n, k}), wts = a.alloc_f32({n, k});   // [T, A]
    ops::RouteParams rp;
    rp.top_k = int32_t(k);
    rp.n_groups = int32_t(c.n_expert_groups);
    rp.topk_groups = int32_t(c.topk_groups);
    rp.renormalize = c.moe_renormalize;
    rp.scale = c.routed_scaling_factor;
    ops::moe_route(ex, logits, w.score_bias, rp, ids, wts);

    // Group the (token, slot) pairs by expert: counting sort into `order`, with `row_of`
    // mapping each pair to its row of the grouped activations.
    int32_t* start = static_cast<int32_t*>(a.alloc_bytes(size_t(n_exp + 1) * sizeof(int32_t)));
    int32_t* fill = static_cast<int32_t*>(a.alloc_bytes(size_t(n_exp) * sizeof(int32_t)));
    int32_t* row_of = static_cast<int32_t*>(a.alloc_bytes(size_t(n * k) * sizeof(int32_t)));
    std::memset(start, 0, size_t(n_exp + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < n * k; ++i) ++start[ids.i32()[i] + 1];
    for (int64_t e = 0; e < n_exp; ++e) start[e + 1] += start[e];
    std::memcpy(fill, start, size_t(n_exp) * sizeof(int32_t));
    Tensor xg = a.alloc_f32({n * k, d});                       // [T*A, D] grouped by expert
    for (int64_t i = 0; i < n * k; ++i) {
        const int32_t r = fill[ids.i32()[i]]++;
        row_of[i] = r;
        std::memcpy(xg.f32() + int64_t(r) * d, x.f32() + (i / k) * d, size_t(d) * sizeof(float));
    }
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
    const int64_t f = w.experts[0].gate.dim(0);
    Tensor g = a.alloc_f32({n * k, f}), u = a.alloc_f32({n * k, f});   // [T*A, F]
    ops::matmul_grouped(ex, xg, std::span<const Tensor* const>(gate, size_t(n_exp)), starts, ex.precision, g);
    ops::matmul_grouped(ex, xg, std::span<const Tensor* const>(up, size_t(n_exp)), starts, ex.precision, u);
    ops::silu_mul(ex, g, u, g);
    Tensor yg = a.alloc_f32({n * k, d});                       // [T*A, D]
    ops::matmul_grouped(ex, g, std::span<const Tensor* const>(down, size_t(n_exp)), starts, ex.precision, yg);

    Tensor out = w.has_shared ? mlp_forward(ex, w.shared, x) : Tensor();
    Tensor y = a.alloc_f32({n, d});                            // [T, D]
    ex.pool->parallel_for(n, [&](int64_t t) {
        float* yr = y.f32() + t * d;
        for (int64_t j = 0; j < d; ++j) yr[j] = 0.0f;
        for (int64_t s = 0; s < k; ++s) {
            const float wt = wts.f32()[t * k + s];
            const float* er = yg.f32() + int64_t(row_of[t * k + s]) * d;
            for (int64_t j = 0; j < d; ++j) yr[j] += wt * er[j];
        }
        if (out.defined()) {
            const float* sr = out.f32() + t * d;
            for (int64_t j = 0; j < d; ++j) yr[j] += sr[j];
        }
    });
    return y;
}

}  // namespace kimi
