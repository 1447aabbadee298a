// MoE routing: sigmoid scores, bias-corrected (grouped) top-k selection, unbiased weights,
// renormalization and routed scaling. ref: docs/model.md#moe and docs/model.md#choices (vLLM grouped_topk
// behaviour: the correction bias affects the choice only).
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

namespace {
// Routed experts per layer the stack buffers hold (Kimi-K3 has 896); the op contract and
// the config enforce it.
constexpr int64_t kMaxExperts = 4096;
}   // namespace

void moe_route(Exec& ex, const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& ids, Tensor& weights) {
    const int64_t n = logits.dim(0), n_exp = logits.dim(1), k = p.top_k;
    const int64_t per_group = n_exp / p.n_groups;
    const float *ls = logits.f32(), *bs = bias.f32();
    int32_t* is = ids.i32();
    float* ws = weights.f32();
    ex.pool->parallel_ranges(n, [&](int64_t t0, int64_t t1, int) {
        float s[kMaxExperts], sel[kMaxExperts];
        bool group_kept[kMaxExperts];
        for (int64_t t = t0; t < t1; ++t) {
            for (int64_t e = 0; e < n_exp; ++e) {
                s[e] = 1.0f / (1.0f + std::exp(-ls[t * n_exp + e]));
                sel[e] = s[e] + bs[e];
            }
            if (p.n_groups > 1) {
                float gscore[kMaxExperts];
                for (int64_t g = 0; g < p.n_groups; ++g) {
                    float a = -INFINITY, b = -INFINITY;   // top-2 of the group
                    for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
                        if (sel[e] > a) {
                            b = a;
                            a = sel[e];
                        } else if (sel[e] > b)
                            b = sel[e];
                    }
                    gscore[g] = per_group > 1 ? a + b : a;
                    group_kept[g] = false;
                }
                for (int64_t r = 0; r < p.topk_groups; ++r) {
                    int64_t best = -1;
                    for (int64_t g = 0; g < p.n_groups; ++g)
                        if (!group_kept[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
                    group_kept[best] = true;
                }
                for (int64_t e = 0; e < n_exp; ++e)
                    if (!group_kept[e / per_group]) sel[e] = -INFINITY;
            }
            int32_t* id = is + t * k;
            float* w = ws + t * k;
            float total = 0.0f;
            for (int64_t r = 0; r < k; ++r) {
                int64_t best = -1;
                for (int64_t e = 0; e < n_exp; ++e) {
                    bool taken = false;
                    for (int64_t q = 0; q < r; ++q) taken |= id[q] == e;
                    if (!taken && sel[e] != -INFINITY && (best < 0 || sel[e] > sel[best])) best = e;
                }
                id[r] = int32_t(best);
                w[r] = s[best];
                total += s[best];
            }
            for (int64_t r = 0; r < k; ++r) w[r] = (p.renormalize ? w[r] / total : w[r]) * p.scale;
        }
    });
}

}   // namespace kimi::cpu
