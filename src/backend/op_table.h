// The op table: every op of the Kimi Linear and Kimi-K3 forward passes, declared once, as an
// X-macro. Each entry is X(name, (parameters)) under a comment that is the op's contract: what
// it computes, then its shapes. Three headers expand it, each into its own namespace:
//   kimi::ops  ops/ops.h              the public ops: check the contract (ops.cpp), run the kernel
//   kimi::cpu  backend/cpu/cpu_ops.h  the CPU kernels
//   kimi::ref  backend/ref/ref_ops.h  the scalar references, the op tests' oracle
// Every op: activations F32 and contiguous; float weights F32, BF16 or F16 (widened exactly);
// each output element computed with arithmetic that does not depend on the number of rows,
// the batch composition or the thread count. Shapes outermost first (T tokens, B sequences,
// H heads, D model width). How to add an op: docs/development.md#add-an-op.
// (Comments inside the macro are /* */: a // comment would swallow the line continuation.)
#pragma once
#include <cstdint>
#include <span>

#include "backend/exec.h"
#include "backend/op_params.h"
#include "core/tensor.h"

// The table is laid out by hand:
// clang-format off
#define KIMI_OPS(X)                                                                                                  \
    /* ---- matrix products ---- */                                                                                  \
    /* y = x · wᵀ.   x: [T, I] · w: [O, I] · y: [T, O]                                                               \
       w: F32, BF16, F16, or MXFP4 (with its scales, I a multiple of 32). Precision::kBF16 rounds                    \
       x to bf16 before the product; accumulation is f32 in both modes. */                                           \
    X(matmul, (Exec& ex, const Tensor& x, const Tensor& w, Precision p, Tensor& y))                                  \
    /* matmul on strided rows (per-head products).   x: n_rows rows of I, every ldx floats ·                         \
       w: [O, I] · y: n_rows rows of O, every ldy floats (the floats between rows untouched) */                      \
    X(matmul_strided, (Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p,          \
                       float* y, int64_t ldy))                                                                       \
    /* MoE expert products: rows [starts[g], starts[g+1]) of x times ws[g]ᵀ into the same rows of y.                 \
         x: [R, I] · ws[g]: [O, I] · y: [R, O] · starts: G + 1 ascending row offsets, starts[G] = R                  \
       One parallel pass over (group, column block); each element is computed exactly as matmul                      \
       would compute it; an empty group's weight is never read (may be null). */                                     \
    X(matmul_grouped, (Exec& ex, const Tensor& x, std::span<const Tensor* const> ws,                                 \
                       std::span<const int32_t> starts, Precision p, Tensor& y))                                     \
                                                                                                                     \
    /* ---- normalizations ---- */                                                                                   \
    /* y = x / sqrt(mean(x²) + eps) · w.   x, y: [T, D] (may alias) · w: [D] F32, BF16 or F16 */                     \
    X(rms_norm, (Exec& ex, const Tensor& x, const Tensor& w, float eps, Tensor& y))                                  \
    /* x[t, h, :] *= scale / sqrt(sum(x[t, h, :]²) + eps), in place.   x: [T, H, K] */                               \
    X(l2_norm_heads, (Exec& ex, Tensor& x, float eps, float scale))                                                  \
    /* y = x / sqrt(mean_V(x²) + eps) · w · sigmoid(z), per head.   x, z, y: [T, H, V] · w: [V] */                   \
    X(gated_rms_norm, (Exec& ex, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& y))           \
                                                                                                                     \
    /* ---- element-wise ---- */                                                                                     \
    /* acc += a.   acc, a: same element count (F32) */                                                               \
    X(add_inplace, (Exec& ex, Tensor& acc, const Tensor& a))                                                         \
    /* y[t] = table[ids[t]].   table: [V, D] F32, BF16 or F16 · ids: [T], each in [0, V) · y: [T, D] */              \
    X(embedding, (Exec& ex, const Tensor& table, std::span<const int32_t> ids, Tensor& y))                           \
    /* x = sigmoid(x), in place.   x: any shape */                                                                   \
    X(sigmoid_inplace, (Exec& ex, Tensor& x))                                                                        \
    /* x = x · sigmoid(gate), in place (the MLA output gate).   x, gate: same element count, F32 */                  \
    X(mul_sigmoid_inplace, (Exec& ex, Tensor& x, const Tensor& gate))                                                \
    /* y = silu(gate) · up.   gate, up, y: [T, F] (y may alias gate) */                                              \
    X(silu_mul, (Exec& ex, const Tensor& gate, const Tensor& up, Tensor& y))                                         \
    /* SiTU (Kimi-K3): y = β·tanh(gate/β)·sigmoid(gate) · β_lin·tanh(up/β_lin); β_lin = 0 leaves                     \
       up as it is.   gate, up, y: [T, F] (y may alias gate) · beta > 0 · linear_beta ≥ 0 */                         \
    X(situ_mul, (Exec& ex, const Tensor& gate, const Tensor& up, float beta, float linear_beta, Tensor& y))          \
                                                                                                                     \
    /* ---- vision tower (docs/vision.md#tower) ---- */                                                              \
    /* x = gelu(x), in place: tanh_approx: 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) (the tower's MLP),                 \
       else 0.5x(1 + erf(x/√2)) (the projector).   x: any shape, F32 */                                              \
    X(gelu_inplace, (Exec& ex, Tensor& x, bool tanh_approx))                                                         \
    /* 2-D RoPE on the q and k parts of a fused qkv, in place.   qkv: [T, 3·H·hd] (q | k | v, each                   \
       head-major); token t sits at row t / grid_w, column t % grid_w; in each head the element pairs                \
       (2j, 2j+1) rotate as complex numbers, pair 2k by column·f_k and pair 2k+1 by row·f_k,                         \
       f_k = 10000^(−4k/hd), k < hd/4.   hd a multiple of 4 */                                                       \
    X(rope_2d, (Exec& ex, Tensor& qkv, int64_t n_heads, int64_t head_dim, int64_t grid_w))                           \
    /* Attention scores over a short reduction (a head's width): s[i, j] = x[i, :] · k[j, :], at                     \
       precision p as matmul (bf16: x rounded to bf16), each score its terms summed in one fixed                     \
       order.   x: n_rows rows of D, every ldx floats · k: [N, D] F32 or BF16, D even ·                              \
       s: n_rows rows of N, every lds floats */                                                                      \
    X(attention_scores, (Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& k, Precision p,        \
                         float* s, int64_t lds))                                                                     \
    /* Attention-weighted values: o[i, :] = Σ_j p[i, j] · v[j, :], at precision prec as matmul (bf16:                \
       p rounded to bf16), each output its terms summed in one fixed order.   p: n_rows rows of N,                   \
       every ldp floats · v: [N, Dv] F32 or BF16 · o: n_rows rows of Dv, every ldo floats */                         \
    X(attention_values, (Exec& ex, const float* p, int64_t n_rows, int64_t ldp, const Tensor& v, Precision prec,     \
                         float* o, int64_t ldo))                                                                     \
    /* x[i, :] = softmax(scale · x[i, :]), in place, row by row.   x: [R, C], F32 · scale > 0 */                            \
    X(softmax_rows, (Exec& ex, Tensor& x, float scale))                                                              \
                                                                                                                     \
    /* ---- KDA (Kimi Delta Attention) ---- */                                                                       \
    /* Depthwise causal conv (kernel W, tap W-1 = current token), then SiLU, continuing each                         \
       sequence from its W-1 previous raw inputs in `state`, which is updated to the last W-1.                       \
         x, y: [T, C] · w: [C, 1, W] F32 · state: [W-1, C] per slot, oldest first                                    \
       seqs.captures: the window after a sequence's first t tokens, copied to another slot. */                       \
    X(causal_conv1d_silu, (Exec& ex, const Tensor& x, const Tensor& w, SlotState state, const SeqLayout& seqs,       \
                           Tensor& y))                                                                               \
    /* g = neg_exp_a[h] · softplus(f + dt_bias) (softplus threshold 20).                                             \
         f, g: [T, H*K] (may alias) · neg_exp_a: [H] F32 · dt_bias: [H*K] F32 */                                     \
    X(kda_gate, (Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, Tensor& g))              \
    /* Kimi-K3 lower-bound forget gate (fla naive_kda_lowerbound_gate), in (lower_bound, 0):                         \
       g = lower_bound · sigmoid(exp(A_log[h]) · (f + dt_bias)).                                                     \
         f, g: [T, H*K] (may alias) · neg_exp_a: [H] F32 = −exp(A_log) · dt_bias: [H*K] F32                          \
         lower_bound < 0 */                                                                                          \
    X(kda_gate_lower_bound, (Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias,              \
                             float lower_bound, Tensor& g))                                                          \
    /* The gated delta rule, token by token per sequence, on its f32 state S [H, K, V], in place:                    \
         S ← diag(exp(g_t)) S;  u = β_t (v_t − Sᵀk_t);  S ← S + k_t uᵀ;  o_t = Sᵀ q_t.                               \
         q, k, g: [T, H, K] · v, o: [T, H, V], V ≤ 512 · beta: [T, H] · state: [H, K, V] per slot                    \
       seqs.captures: the state after a sequence's first t tokens, copied to another slot. */                        \
    X(kda_recurrent, (Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,                  \
                      const Tensor& beta, SlotState state, const SeqLayout& seqs, Tensor& o))                        \
                                                                                                                     \
    /* ---- MLA (multi-head latent attention) ---- */                                                                \
    /* Writes latents[t] of every token into the paged cache (f32, or bf16 rounded to nearest                        \
       even) at position n_past[b] + (t − seq_starts[b]) of its sequence b.                                          \
         latents: [T, R+P] · seq_starts: [B+1] · n_past: [B] tokens already cached per sequence */                   \
    X(mla_cache_write, (Exec& ex, const Tensor& latents, const PagedLatents& cache,                                  \
                        std::span<const int32_t> seq_starts, std::span<const int32_t> n_past))                       \
    /* Absorbed NoPE MLA attention over the paged latent cache, causal (token t of sequence b                        \
       attends to positions [0, n_past[b] + (t − seq_starts[b])]):                                                   \
         s_j = scale · q_abs·[c_j ; k_rope_j];  o_lat = Σ_j softmax(s)_j c_j.                                        \
         q_abs: [T, H, R+P] · o_lat: [T, H, R] · seq_starts: [B+1] · n_past: [B] */                                  \
    X(mla_attention, (Exec& ex, const Tensor& q_abs, const PagedLatents& cache,                                      \
                      std::span<const int32_t> seq_starts, std::span<const int32_t> n_past, float scale,             \
                      Tensor& o_lat))                                                                                \
                                                                                                                     \
    /* ---- residual mixing and routing ---- */                                                                      \
    /* Block Attention Residuals mix (Kimi-K3, docs/model.md#attnres), per token over the entries                    \
       e = blocks[0..n-1], partial: s_i = rsqrt(mean(e_i²) + eps) · Σ_d e_i[d]·score_w[d];                           \
       y = Σ_i softmax(s)_i · e_i (the raw entries, in that order).                                                  \
         blocks[i], partial, y: [T, D] (y aliases no block) · score_w: [D] F32 = norm weight × proj weight */        \
    X(attn_res_mix, (Exec& ex, std::span<const Tensor* const> blocks, const Tensor& partial, const Tensor& score_w,  \
                     float eps, Tensor& y))                                                                          \
    /* MoE routing (DeepSeek-V3 noaux_tc, as in Kimi Linear): s = sigmoid(logits); experts are                       \
       selected by s + bias (grouped top-k when n_groups > 1: group score = sum of its top 2, keep                   \
       topk_groups groups); weights are the unbiased s of the selected experts, renormalized to                      \
       sum 1 if p.renormalize, times p.scale. Ties go to the lower index.                                            \
         logits: [T, E] F32, E ≤ 4096 · bias: [E] F32 · ids: [T, top_k] I32 · weights: [T, top_k] F32 */             \
    X(moe_route, (Exec& ex, const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& ids,             \
                  Tensor& weights))                                                                                  \
    /* MoE dispatch: the (token, slot) pairs grouped by expert, a counting sort stable in (token, slot)              \
       order. starts[e] .. starts[e + 1] are expert e's rows (the experts with local[e] = 0, another                 \
       rank's, get none); row_of[t, s] is the pair's row, -1 for another rank's expert; row r of xg is              \
       the row of x of its token. M = starts[E] rows of xg are written, the rest left as they are.                  \
         x: [T, In] F32 · ids: [T, A] I32 in [0, E) · local: [E] · starts: [E + 1] I32 · row_of: [T, A] I32 ·       \
         xg: [T·A, In] F32 */                                                                                        \
    X(moe_dispatch, (Exec& ex, const Tensor& x, const Tensor& ids, std::span<const uint8_t> local, Tensor& starts,   \
                     Tensor& row_of, Tensor& xg))                                                                    \
    /* MoE combine: y[t] = Σ_s weights[t, s] · yg[row_of[t, s]], from +0 over the slots s in order (f32,            \
       each product rounded, then the sum), skipping the rows -1 (another rank's experts).                          \
         yg: [M, In] F32 · row_of: [T, A] I32 in [-1, M) · weights: [T, A] F32 · y: [T, In] F32 */                   \
    X(moe_combine, (Exec& ex, const Tensor& yg, const Tensor& row_of, const Tensor& weights, Tensor& y))
// clang-format on

// Declares each op in the enclosing namespace: namespace kimi::x { KIMI_OPS(KIMI_OP_DECLARE) }
// (with the parameter structs of op_params.h visible there).
#define KIMI_OP_DECLARE(name, params) void name params;
