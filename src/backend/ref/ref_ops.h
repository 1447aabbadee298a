// Scalar reference of every op in ops/ops.h: plain loops, double accumulation, no threads,
// no blocking — obviously correct, and the oracle the op tests compare the kernels against.
#pragma once
#include "backend/exec.h"
#include "backend/op_params.h"
#include "core/tensor.h"

namespace kimi::ref {

using ops::PagedLatents;
using ops::RouteParams;
using ops::SeqLayout;
using ops::SlotState;

void matmul(const Tensor& x, const Tensor& w, Precision p, Tensor& y);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);
void causal_conv1d_silu(const Tensor& x, const Tensor& w, SlotState state, const SeqLayout& seqs, Tensor& y);
void l2_norm_heads(Tensor& x, float eps, float scale);
void kda_gate(const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, Tensor& g);
void kda_gate_lower_bound(const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, float lower_bound, Tensor& g);
void mul_sigmoid_inplace(Tensor& x, const Tensor& gate);
void kda_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                   SlotState state, const SeqLayout& seqs, Tensor& o);
void gated_rms_norm(const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& y);
void mla_attention(const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& y);
void situ_mul(const Tensor& gate, const Tensor& up, float beta, float linear_beta, Tensor& y);
void attn_res_mix(std::span<const Tensor* const> blocks, const Tensor& partial, const Tensor& score_w, float eps, Tensor& y);
void moe_route(const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& ids, Tensor& weights);

}  // namespace kimi::ref
