// MLA layer forward (see mla_attention.h). The absorbed form is used for prefill and decode
// alike, so a token's attention arithmetic is the same however the sequence was fed.
#include "model/layers/mla_attention.h"

#include <cmath>
#include <cstring>

#include "model/layers/attn_output.h"

namespace kimi {

Tensor mla_attention_forward(LayerContext& lc, const MlaWeights& w, int64_t mla_layer, const Tensor& x) {
    Exec& ex = lc.ex;
    Arena& a = *ex.arena;
    const Precision p = ex.precision;
    const ModelConfig& c = lc.cfg;
    const int64_t n = x.dim(0), h = c.mla_heads, nope = c.qk_nope_dim, rope = c.qk_rope_dim, dv = c.v_head_dim;
    const int64_t rank = c.kv_lora_rank, qk = nope + rope, width = rank + rope;

    Tensor q = a.alloc_f32({n, h * qk});               // [T, H*(N+P)]
    if (w.q_a.defined()) {                             // q-LoRA (K3)
        Tensor qa = a.alloc_f32({n, c.q_lora_rank});   // [T, Q]
        ops::matmul(ex, x, w.q_a, p, qa);
        // why: eps 1e-6 as the checkpoint's own modeling code (KimiRMSNorm class default).
        ops::rms_norm(ex, qa, w.q_a_norm, 1e-6f, qa);
        ops::matmul(ex, qa, w.q_b, p, q);
    } else {
        ops::matmul(ex, x, w.q_proj, p, q);
    }
    Tensor lat = a.alloc_f32({n, rank}), k_rope = a.alloc_f32({n, rope});
    ops::matmul(ex, x, w.kv_a_c, p, lat);         // [T, R]
    ops::matmul(ex, x, w.kv_a_rope, p, k_rope);   // [T, P]
    // why: eps 1e-6 as the checkpoint's own modeling code (KimiRMSNorm class default).
    ops::rms_norm(ex, lat, w.kv_a_norm, 1e-6f, lat);

    ops::PagedLatents cache = lc.cache.mla_latents(mla_layer);
    cache.block_tables = lc.batch.block_tables;
    cache.max_blocks = lc.batch.max_blocks;
    Tensor latents = a.alloc_f32({n, width});   // [T, R+P]
    for (int64_t t = 0; t < n; ++t) {
        std::memcpy(latents.f32() + t * width, lat.f32() + t * rank, size_t(rank) * sizeof(float));
        std::memcpy(latents.f32() + t * width + rank, k_rope.f32() + t * rope, size_t(rope) * sizeof(float));
    }
    ops::mla_cache_write(ex, latents, cache, lc.batch.seq_starts, lc.batch.n_past);

    // Absorbed query per head: [W_UK[h]ᵀ q_nope ; q_rope]  → [T, H, R+P]
    Tensor q_abs = a.alloc_f32({n, h, width});
    for (int64_t hh = 0; hh < h; ++hh)
        ops::matmul_strided(ex, q.f32() + hh * qk, n, h * qk, w.w_uk_t.row(hh), p, q_abs.f32() + hh * width, h * width);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t hh = 0; hh < h; ++hh)
            std::memcpy(q_abs.f32() + (t * h + hh) * width + rank, q.f32() + (t * h + hh) * qk + nope,
                        size_t(rope) * sizeof(float));

    Tensor o_lat = a.alloc_f32({n, h, rank});   // [T, H, R]
    ops::mla_attention(ex, q_abs, cache, lc.batch.seq_starts, lc.batch.n_past, 1.0f / std::sqrt(float(qk)), o_lat);

    Tensor o = a.alloc_f32({n, h * dv});   // [T, H*V]
    for (int64_t hh = 0; hh < h; ++hh)
        ops::matmul_strided(ex, o_lat.f32() + hh * rank, n, h * rank, w.w_uv.row(hh), p, o.f32() + hh * dv, h * dv);

    if (w.g_proj.defined()) {                     // sigmoid output gate on the layer input (K3)
        Tensor gate = a.alloc_f32({n, h * dv});   // [T, H*V]
        ops::matmul(ex, x, w.g_proj, p, gate);
        ops::mul_sigmoid_inplace(ex, o, gate);
    }

    return attn_o_proj(ex, o, w.o_proj);   // [T, D]
}

}   // namespace kimi
