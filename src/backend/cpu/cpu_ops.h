// CPU kernels, one per op of ops/ops.h (same names and contracts; contracts are checked in
// ops.cpp before these run).
#pragma once
#include "backend/exec.h"
#include "backend/op_params.h"
#include "core/tensor.h"

namespace kimi::cpu {

using ops::PagedLatents;
using ops::RouteParams;
using ops::SeqLayout;
using ops::StateCapture;
using ops::SlotState;

void matmul(Exec& ex, const Tensor& x, const Tensor& w, Precision p, Tensor& y);
void matmul_grouped(Exec& ex, const Tensor& x, std::span<const Tensor* const> ws, std::span<const int32_t> starts,
                    Precision p, Tensor& y);
void matmul_strided(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p, float* y,
                    int64_t ldy);
void rms_norm(Exec& ex, const Tensor& x, const Tensor& w, float eps, Tensor& y);
void add_inplace(Exec& ex, Tensor& acc, const Tensor& a);
void embedding(Exec& ex, const Tensor& table, std::span<const int32_t> ids, Tensor& y);
void causal_conv1d_silu(Exec& ex, const Tensor& x, const Tensor& w, SlotState state, const SeqLayout& seqs, Tensor& y);
void l2_norm_heads(Exec& ex, Tensor& x, float eps, float scale);
void kda_gate(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, Tensor& g);
void kda_gate_lower_bound(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, float lower_bound,
                          Tensor& g);
void sigmoid_inplace(Exec& ex, Tensor& x);
void mul_sigmoid_inplace(Exec& ex, Tensor& x, const Tensor& gate);
void kda_recurrent(Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                   SlotState state, const SeqLayout& seqs, Tensor& o);
void gated_rms_norm(Exec& ex, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& y);
void mla_cache_write(Exec& ex, const Tensor& latents, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                     std::span<const int32_t> n_past);
void mla_attention(Exec& ex, const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat);
void silu_mul(Exec& ex, const Tensor& gate, const Tensor& up, Tensor& y);
void situ_mul(Exec& ex, const Tensor& gate, const Tensor& up, float beta, float linear_beta, Tensor& y);
void attn_res_mix(Exec& ex, std::span<const Tensor* const> blocks, const Tensor& partial, const Tensor& score_w,
                  float eps, Tensor& y);
void moe_route(Exec& ex, const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& ids, Tensor& weights);

// Dot product with the fixed 8-lane reduction order of the matmul kernels (plain C++).
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace kimi::cpu
