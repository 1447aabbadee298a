// The op catalogue: every op the Kimi Linear and Kimi-K3 forward passes use, with its shape contract.
// Activations are F32 and contiguous; weights may be F32, BF16 or F16 (widened exactly).
// Contracts are checked here (ops.cpp), kernels live in backend/cpu, scalar references in
// backend/ref (the test oracle). Every op computes each output element with arithmetic
// that does not depend on the number of rows, the batch composition or the thread count.
#pragma once
#include <cstdint>
#include <span>

#include "backend/exec.h"
#include "backend/op_params.h"
#include "core/tensor.h"

namespace kimi::ops {

// y = x · wᵀ.   x: [T, I] · w: [O, I] · y: [T, O]. In Precision::kBF16 x is rounded to
// bf16 before the product; accumulation is f32 in both modes.
void matmul(Exec& ex, const Tensor& x, const Tensor& w, Precision p, Tensor& y);

// Strided form used for per-head products: rows of x start every ldx floats, rows of y
// every ldy floats.  x: T rows of I · w: [O, I] · y: T rows of O.
void matmul_strided(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p,
                    float* y, int64_t ldy);

// Grouped products (MoE experts): rows [starts[g], starts[g+1]) of x times ws[g]ᵀ into the
// same rows of y, for every group, in one parallel pass over (group, 16-column block); each
// element is computed exactly as matmul would.  x: [R, I] · ws[g]: [O, I] · y: [R, O] ·
// starts: G + 1 ascending row offsets, starts[G] = R.
void matmul_grouped(Exec& ex, const Tensor& x, std::span<const Tensor* const> ws, std::span<const int32_t> starts,
                    Precision p, Tensor& y);

// y = x / sqrt(mean(x²) + eps) * w.   x, y: [T, D] (may alias) · w: [D]
void rms_norm(Exec& ex, const Tensor& x, const Tensor& w, float eps, Tensor& y);

// acc += a.   acc, a: [T, D]
void add_inplace(Exec& ex, Tensor& acc, const Tensor& a);

// y[t] = table[ids[t]].   table: [V, D] · y: [T, D]; ids already range-checked by the caller.
void embedding(Exec& ex, const Tensor& table, std::span<const int32_t> ids, Tensor& y);

// Depthwise causal conv (kernel W, tap W-1 = current token) followed by SiLU, continuing
// each sequence from its W-1 previous raw inputs in `state` ([W-1, C] per slot, oldest
// first), which is updated to the last W-1 raw inputs.  x, y: [T, C] · w: [C, 1, W]
void causal_conv1d_silu(Exec& ex, const Tensor& x, const Tensor& w, SlotState state, const SeqLayout& seqs,
                        Tensor& y);

// x[t, h, :] *= scale / sqrt(sum(x[t, h, :]²) + eps), in place.   x: [T, H, K]
void l2_norm_heads(Exec& ex, Tensor& x, float eps, float scale);

// g = neg_exp_a[h] * softplus(f + dt_bias) (softplus threshold 20).
//   f, g: [T, H*K] (may alias) · neg_exp_a: [H] F32 · dt_bias: [H*K]
void kda_gate(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, Tensor& g);

// The lower-bound forget gate (Kimi-K3, fla naive_kda_lowerbound_gate):
// g = lower_bound · sigmoid(exp(A_log[h]) · (f + dt_bias)), in (lower_bound, 0).
//   f, g: [T, H*K] (may alias) · neg_exp_a: [H] F32 = −exp(A_log) · dt_bias: [H*K] · lower_bound < 0
void kda_gate_lower_bound(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, float lower_bound,
                          Tensor& g);

// x = sigmoid(x), in place.   x: any shape
void sigmoid_inplace(Exec& ex, Tensor& x);

// x = x · sigmoid(gate), in place (the MLA output gate).   x, gate: same element count
void mul_sigmoid_inplace(Exec& ex, Tensor& x, const Tensor& gate);

// The gated delta rule, token by token per sequence, state S [H, K, V] f32 updated in place:
//   S ← diag(exp(g_t)) S;  u = β_t (v_t − Sᵀk_t);  S ← S + k_t uᵀ;  o_t = Sᵀ q_t.
//   q, k, g: [T, H, K] · v, o: [T, H, V] · beta: [T, H] · state: [H, K, V] per slot
void kda_recurrent(Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                   const Tensor& beta, SlotState state, const SeqLayout& seqs, Tensor& o);

// y = x / sqrt(mean_V(x²) + eps) * w * sigmoid(z), per head.   x, z, y: [T, H, V] · w: [V]
void gated_rms_norm(Exec& ex, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& y);

// Writes latents[t] of every token into the cache at its position.
//   latents: [T, R+P] · n_past: [B] tokens already cached per sequence
void mla_cache_write(Exec& ex, const Tensor& latents, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                     std::span<const int32_t> n_past);

// Absorbed NoPE MLA attention over the paged latent cache, causal (token t of sequence b
// attends to positions [0, n_past[b] + (t - seq_starts[b])]):
//   s_j = scale · q̃·[c_j ; k_rope_j];  o_lat = Σ softmax(s)_j c_j.
//   q_abs: [T, H, R+P] · o_lat: [T, H, R]
void mla_attention(Exec& ex, const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat);

// y = silu(gate) * up.   gate, up, y: [T, F] (y may alias gate)
void silu_mul(Exec& ex, const Tensor& gate, const Tensor& up, Tensor& y);

// SiTU (Kimi-K3): y = β·tanh(gate/β)·sigmoid(gate) · β_lin·tanh(up/β_lin); β_lin = 0 leaves
// up as it is.   gate, up, y: [T, F] (y may alias gate) · beta > 0 · linear_beta ≥ 0
void situ_mul(Exec& ex, const Tensor& gate, const Tensor& up, float beta, float linear_beta, Tensor& y);

// Block Attention Residuals mix (Kimi-K3, docs/model.md#attnres): per token, over the entries
// e_0..e_n = blocks[0..n-1], partial: s_i = rsqrt(mean(e_i²) + eps) · Σ_d e_i[d]·score_w[d];
// y = Σ_i softmax(s)_i · e_i (the raw entries, in that order).
//   blocks[i], partial, y: [T, D] · score_w: [D] F32 (norm weight × proj weight)
void attn_res_mix(Exec& ex, std::span<const Tensor* const> blocks, const Tensor& partial, const Tensor& score_w,
                  float eps, Tensor& y);

// MoE routing (DeepSeek-V3 noaux_tc as in Kimi Linear): s = sigmoid(logits); experts are
// selected by s + bias (grouped top-k when n_groups > 1: group score = sum of its top-2,
// keep topk_groups groups); weights are the unbiased s of the selected experts,
// renormalized to sum 1 if `renormalize`, times `scale`. Ties go to the lower index.
//   logits: [T, E] F32 · bias: [E] · ids: [T, A] I32 · weights: [T, A] F32
void moe_route(Exec& ex, const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& ids,
               Tensor& weights);

}  // namespace kimi::ops
