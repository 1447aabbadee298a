// KDA core: the gated delta rule, token by token, on the fp32 [H, K, V] state of each
// sequence's slot, updated in place. Prefill and decode run this same recurrence, so a
// token's arithmetic never depends on chunking or batching (bit-identical logits).
// ref: model-spec §3.3; fla naive_recurrent_kda / fused_recurrent (gk branch).
#include <cmath>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

void kda_recurrent(Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                   SlotState state, const SeqLayout& seqs, Tensor& o) {
    const int64_t n_heads = q.dim(1), dk = q.dim(2), dv = v.dim(2);
    const float *qs = q.f32(), *ks = k.f32(), *vs = v.f32(), *gs = g.f32(), *bs = beta.f32();
    float* os = o.f32();
    const int64_t n_seqs = int64_t(seqs.slots.size());
    ex.pool->parallel_for(n_seqs * n_heads, [&](int64_t task) {
        const int64_t b = task / n_heads, h = task % n_heads;
        float* s = state.base + int64_t(seqs.slots[size_t(b)]) * state.slot_stride + h * dk * dv;   // [K, V]
        float u[512];
        float* uv = dv <= 512 ? u : nullptr;
        KIMI_CHECK(uv != nullptr, "kda_recurrent: head_v_dim > 512");
        for (int64_t t = seqs.seq_starts[size_t(b)]; t < seqs.seq_starts[size_t(b) + 1]; ++t) {
            const int64_t row = t * n_heads + h;
            const float *qt = qs + row * dk, *kt = ks + row * dk, *vt = vs + row * dv, *gt = gs + row * dk;
            const float bt = bs[row];
            float* ot = os + row * dv;
            // decay and predict: S[d,:] *= exp(g[d]); p += k[d] * S[d,:]
            for (int64_t j = 0; j < dv; ++j) uv[j] = 0.0f;
            for (int64_t d = 0; d < dk; ++d) {
                const float a = std::exp(gt[d]), kd = kt[d];
                float* sr = s + d * dv;
                for (int64_t j = 0; j < dv; ++j) {
                    sr[j] *= a;
                    uv[j] += kd * sr[j];
                }
            }
            for (int64_t j = 0; j < dv; ++j) uv[j] = bt * (vt[j] - uv[j]);
            // write and read: S[d,:] += k[d] * u; o += q[d] * S[d,:]
            for (int64_t j = 0; j < dv; ++j) ot[j] = 0.0f;
            for (int64_t d = 0; d < dk; ++d) {
                const float kd = kt[d], qd = qt[d];
                float* sr = s + d * dv;
                for (int64_t j = 0; j < dv; ++j) {
                    sr[j] += kd * uv[j];
                    ot[j] += qd * sr[j];
                }
            }
        }
    });
}

}  // namespace kimi::cpu
