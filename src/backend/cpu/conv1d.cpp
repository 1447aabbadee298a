// Depthwise causal short convolution + SiLU with a per-sequence window state (the W-1 last
// raw inputs). One code path for prefill and decode: every token goes through the window.
// State captures (prefix-cache checkpoints) copy the window as it stands mid-sequence.
// ref: docs/model.md#kda-conv (step 2) and docs/model.md#kda-decode, fla ShortConvolution(activation='silu').
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"

namespace kimi::cpu {

void causal_conv1d_silu(Exec& ex, const Tensor& x, const Tensor& w, SlotState state, const SeqLayout& seqs, Tensor& y) {
    const int64_t c_total = x.dim(1), width = w.dim(2), hist = width - 1;
    const float *xs = x.f32(), *ws = w.f32();
    float* ys = y.f32();
    const int64_t n_seqs = int64_t(seqs.slots.size());
    constexpr int64_t kChannels = 64;
    const int64_t n_cblocks = (c_total + kChannels - 1) / kChannels;
    ex.pool->parallel_for(n_seqs * n_cblocks, [&](int64_t task) {
        const int64_t b = task / n_cblocks, c0 = (task % n_cblocks) * kChannels;
        const int64_t c1 = std::min(c_total, c0 + kChannels);
        float* st = state.base + int64_t(seqs.slots[size_t(b)]) * state.slot_stride;   // [W-1, C]
        const int64_t t0 = seqs.seq_starts[size_t(b)];
        size_t next_capture = 0;
        for (int64_t t = t0; t < seqs.seq_starts[size_t(b) + 1]; ++t) {
            // A capture after t - t0 tokens: the window as it stands before token t.
            for (; next_capture < seqs.captures.size(); ++next_capture) {
                const StateCapture& c = seqs.captures[next_capture];
                if (c.seq < b || (c.seq == b && t0 + c.t < t)) continue;
                if (c.seq != b || t0 + c.t != t) break;
                float* dst = state.base + int64_t(c.slot) * state.slot_stride;
                for (int64_t i = 0; i < hist; ++i)
                    std::copy(st + i * c_total + c0, st + i * c_total + c1, dst + i * c_total + c0);
            }
            const float* xr = xs + t * c_total;
            float* yr = ys + t * c_total;
            for (int64_t c = c0; c < c1; ++c) {
                const float* wc = ws + c * width;
                float acc = 0.0f;
                for (int64_t i = 0; i < hist; ++i) acc += wc[i] * st[i * c_total + c];
                acc += wc[hist] * xr[c];
                for (int64_t i = 0; i + 1 < hist; ++i) st[i * c_total + c] = st[(i + 1) * c_total + c];
                if (hist > 0) st[(hist - 1) * c_total + c] = xr[c];
                yr[c] = acc / (1.0f + std::exp(-acc));
            }
        }
    });
}

}   // namespace kimi::cpu
