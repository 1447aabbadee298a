// KDA core: the gated delta rule, token by token, on the fp32 [H, K, V] state of each
// sequence's slot, updated in place. Prefill and decode run this same recurrence, so a
// token's arithmetic never depends on chunking or batching (bit-identical logits). One task
// per (sequence, head); the per-head loop is kda_kernel.h, vectorized for AVX-512 where used.
// State captures (prefix-cache checkpoints) copy a head's state between two token runs.
// ref: docs/model.md#kda-recurrence; fla naive_recurrent_kda / fused_recurrent (gk branch).
#include <algorithm>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kda_kernel.h"

namespace kimi::cpu {

void kda_head_portable(const KdaHeadArgs& a, float* uv) { kda_head_portable_body(a, uv); }

void kda_recurrent(Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                   SlotState state, const SeqLayout& seqs, Tensor& o) {
    const int64_t n_heads = q.dim(1), dk = q.dim(2), dv = v.dim(2);
    KIMI_CHECK(dv <= 512, "kda_recurrent: head_v_dim > 512");
    const auto head_fn = use_avx512() ? kda_head_avx512 : kda_head_portable;
    const int64_t n_seqs = int64_t(seqs.slots.size());
    ex.pool->parallel_for(n_seqs * n_heads, [&](int64_t task) {
        const int64_t b = task / n_heads, h = task % n_heads;
        alignas(64) float u[512];
        KdaHeadArgs a;
        a.q = q.f32() + h * dk;
        a.k = k.f32() + h * dk;
        a.g = g.f32() + h * dk;
        a.v = v.f32() + h * dv;
        a.o = o.f32() + h * dv;
        a.beta = beta.f32() + h;
        a.row_stride_k = n_heads * dk;
        a.row_stride_v = n_heads * dv;
        a.beta_stride = n_heads;
        const int64_t t0 = seqs.seq_starts[size_t(b)], t1 = seqs.seq_starts[size_t(b) + 1];
        a.dk = dk;
        a.dv = dv;
        a.state = state.base + int64_t(seqs.slots[size_t(b)]) * state.slot_stride + h * dk * dv;   // [K, V]
        // Captures split the token run; the recurrence itself is unchanged (same bits).
        a.t_begin = t0;
        for (const StateCapture& c : seqs.captures) {
            if (c.seq != b) continue;
            a.t_end = t0 + c.t;
            head_fn(a, u);
            std::copy_n(a.state, dk * dv, state.base + int64_t(c.slot) * state.slot_stride + h * dk * dv);
            a.t_begin = a.t_end;
        }
        a.t_end = t1;
        head_fn(a, u);
    });
}

}   // namespace kimi::cpu
