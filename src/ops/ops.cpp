// Op contracts: every shape/dtype rule of the op table (backend/op_table.h) is checked here,
// once, then the CPU kernel runs. A violated contract is a programmer error (KIMI_CHECK aborts
// with file:line).
#include "ops/ops.h"

#include "backend/cpu/cpu_ops.h"

namespace kimi::ops {

namespace {
bool is_float_class(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }
// A matrix-product weight: a float class, or MXFP4 with its scales and I a multiple of 32.
bool is_weight(const Tensor& w) {
    if (w.dtype == DType::kMXFP4) return w.scale != nullptr && w.rank == 2 && w.dim(1) % kMxfp4Group == 0;
    if (is_block_quant(w.dtype)) return w.rank == 2 && w.dim(1) % dtype_block(w.dtype).elems == 0;
    return is_float_class(w.dtype);
}
bool same_shape(const Tensor& a, const Tensor& b) { return a.rank == b.rank && a.shape == b.shape; }
#define CONTRACT(cond) KIMI_CHECK(cond, std::string(__func__) + ": contract violated")
// Captures ordered by (seq, t), strictly inside their sequence's tokens, into another slot.
bool captures_valid(const SeqLayout& seqs) {
    for (size_t i = 0; i < seqs.captures.size(); ++i) {
        const StateCapture& c = seqs.captures[i];
        if (c.seq < 0 || size_t(c.seq) >= seqs.slots.size() || c.t <= 0) return false;
        if (c.t >= seqs.seq_starts[size_t(c.seq) + 1] - seqs.seq_starts[size_t(c.seq)] || c.slot < 0) return false;
        for (int32_t s : seqs.slots)
            if (s == c.slot) return false;
        if (i > 0 &&
            (seqs.captures[i - 1].seq > c.seq || (seqs.captures[i - 1].seq == c.seq && seqs.captures[i - 1].t >= c.t)))
            return false;
    }
    return true;
}
}   // namespace

void matmul(Exec& ex, const Tensor& x, const Tensor& w, Precision p, Tensor& y) {
    CONTRACT(x.rank == 2 && w.rank == 2 && y.rank == 2 && is_weight(w));
    CONTRACT(x.dim(1) == w.dim(1) && y.dim(0) == x.dim(0) && y.dim(1) == w.dim(0));
    cpu::matmul(ex, x, w, p, y);
}

void matmul_strided(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p, float* y,
                    int64_t ldy) {
    CONTRACT(w.rank == 2 && is_weight(w) && ldx >= w.dim(1) && ldy >= w.dim(0));
    cpu::matmul_strided(ex, x, n_rows, ldx, w, p, y, ldy);
}

void matmul_grouped(Exec& ex, const Tensor& x, std::span<const Tensor* const> ws, std::span<const int32_t> starts,
                    Precision p, Tensor& y) {
    CONTRACT(x.rank == 2 && y.rank == 2 && x.dim(0) == y.dim(0) && starts.size() == ws.size() + 1);
    CONTRACT(starts.front() == 0 && starts.back() == x.dim(0));
    for (size_t g = 0; g < ws.size(); ++g) {
        CONTRACT(starts[g] <= starts[g + 1]);
        if (starts[g] == starts[g + 1]) continue;   // an empty group's weight is never read (may be absent)
        CONTRACT(ws[g]->rank == 2 && is_weight(*ws[g]) && ws[g]->dim(1) == x.dim(1) && ws[g]->dim(0) == y.dim(1));
    }
    cpu::matmul_grouped(ex, x, ws, starts, p, y);
}

void rms_norm(Exec& ex, const Tensor& x, const Tensor& w, float eps, Tensor& y) {
    CONTRACT(x.rank == 2 && same_shape(x, y) && w.numel() == x.dim(1) && is_float_class(w.dtype));
    cpu::rms_norm(ex, x, w, eps, y);
}

void add_inplace(Exec& ex, Tensor& acc, const Tensor& a) {
    CONTRACT(acc.numel() == a.numel());
    cpu::add_inplace(ex, acc, a);
}

void embedding(Exec& ex, const Tensor& table, std::span<const int32_t> ids, Tensor& y) {
    CONTRACT(table.rank == 2 && y.rank == 2 && y.dim(0) == int64_t(ids.size()) && y.dim(1) == table.dim(1));
    for (int32_t id : ids) CONTRACT(id >= 0 && id < table.dim(0));
    cpu::embedding(ex, table, ids, y);
}

void causal_conv1d_silu(Exec& ex, const Tensor& x, const Tensor& w, SlotState state, const SeqLayout& seqs, Tensor& y) {
    CONTRACT(x.rank == 2 && same_shape(x, y) && w.rank == 3 && w.dim(0) == x.dim(1) && w.dim(1) == 1);
    CONTRACT(w.dtype == DType::kF32 && seqs.seq_starts.size() == seqs.slots.size() + 1);
    CONTRACT(state.slot_stride >= (w.dim(2) - 1) * x.dim(1) && captures_valid(seqs));
    cpu::causal_conv1d_silu(ex, x, w, state, seqs, y);
}

void l2_norm_heads(Exec& ex, Tensor& x, float eps, float scale) {
    CONTRACT(x.rank == 3);
    cpu::l2_norm_heads(ex, x, eps, scale);
}

void kda_gate(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, Tensor& g) {
    CONTRACT(f.rank == 2 && same_shape(f, g) && neg_exp_a.dtype == DType::kF32 && dt_bias.dtype == DType::kF32);
    CONTRACT(dt_bias.numel() == f.dim(1) && neg_exp_a.numel() > 0 && f.dim(1) % neg_exp_a.numel() == 0);
    cpu::kda_gate(ex, f, neg_exp_a, dt_bias, g);
}

void kda_gate_lower_bound(Exec& ex, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, float lower_bound,
                          Tensor& g) {
    CONTRACT(f.rank == 2 && same_shape(f, g) && neg_exp_a.dtype == DType::kF32 && dt_bias.dtype == DType::kF32);
    CONTRACT(dt_bias.numel() == f.dim(1) && neg_exp_a.numel() > 0 && f.dim(1) % neg_exp_a.numel() == 0 &&
             lower_bound < 0.0f);
    cpu::kda_gate_lower_bound(ex, f, neg_exp_a, dt_bias, lower_bound, g);
}

void sigmoid_inplace(Exec& ex, Tensor& x) { cpu::sigmoid_inplace(ex, x); }

void mul_sigmoid_inplace(Exec& ex, Tensor& x, const Tensor& gate) {
    CONTRACT(x.numel() == gate.numel() && x.dtype == DType::kF32 && gate.dtype == DType::kF32);
    cpu::mul_sigmoid_inplace(ex, x, gate);
}

void kda_recurrent(Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                   SlotState state, const SeqLayout& seqs, Tensor& o) {
    CONTRACT(q.rank == 3 && same_shape(q, k) && same_shape(q, g) && v.rank == 3 && same_shape(v, o));
    CONTRACT(v.dim(0) == q.dim(0) && v.dim(1) == q.dim(1) && v.dim(2) <= 512);
    CONTRACT(beta.numel() == q.dim(0) * q.dim(1) && seqs.seq_starts.size() == seqs.slots.size() + 1);
    CONTRACT(state.slot_stride >= q.dim(1) * q.dim(2) * v.dim(2) && captures_valid(seqs));
    cpu::kda_recurrent(ex, q, k, v, g, beta, state, seqs, o);
}

void gated_rms_norm(Exec& ex, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& y) {
    CONTRACT(x.rank == 3 && same_shape(x, z) && same_shape(x, y) && w.numel() == x.dim(2));
    cpu::gated_rms_norm(ex, x, w, z, eps, y);
}

void mla_cache_write(Exec& ex, const Tensor& latents, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                     std::span<const int32_t> n_past) {
    CONTRACT(latents.rank == 2 && latents.dim(1) == cache.row_width && seq_starts.size() == n_past.size() + 1);
    CONTRACT((cache.base != nullptr) != (cache.base_bf16 != nullptr));
    cpu::mla_cache_write(ex, latents, cache, seq_starts, n_past);
}

void mla_attention(Exec& ex, const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat) {
    CONTRACT(q_abs.rank == 3 && q_abs.dim(2) == cache.row_width && o_lat.rank == 3);
    CONTRACT(o_lat.dim(0) == q_abs.dim(0) && o_lat.dim(1) == q_abs.dim(1) && o_lat.dim(2) <= cache.row_width);
    CONTRACT(seq_starts.size() == n_past.size() + 1 && (cache.base != nullptr) != (cache.base_bf16 != nullptr));
    cpu::mla_attention(ex, q_abs, cache, seq_starts, n_past, scale, o_lat);
}

void silu_mul(Exec& ex, const Tensor& gate, const Tensor& up, Tensor& y) {
    CONTRACT(gate.numel() == up.numel() && gate.numel() == y.numel());
    cpu::silu_mul(ex, gate, up, y);
}

void situ_mul(Exec& ex, const Tensor& gate, const Tensor& up, float beta, float linear_beta, Tensor& y) {
    CONTRACT(gate.numel() == up.numel() && gate.numel() == y.numel() && beta > 0.0f && linear_beta >= 0.0f);
    cpu::situ_mul(ex, gate, up, beta, linear_beta, y);
}

void gelu_inplace(Exec& ex, Tensor& x, bool tanh_approx) {
    CONTRACT(x.dtype == DType::kF32);
    cpu::gelu_inplace(ex, x, tanh_approx);
}

void rope_2d(Exec& ex, Tensor& qkv, int64_t n_heads, int64_t head_dim, int64_t grid_w) {
    CONTRACT(qkv.rank == 2 && qkv.dtype == DType::kF32 && n_heads >= 1 && head_dim % 4 == 0 && grid_w >= 1);
    CONTRACT(qkv.dim(1) == 3 * n_heads * head_dim);
    cpu::rope_2d(ex, qkv, n_heads, head_dim, grid_w);
}

void attention_scores(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& k, Precision p, float* s,
                      int64_t lds) {
    CONTRACT(k.rank == 2 && (k.dtype == DType::kF32 || k.dtype == DType::kBF16) && k.dim(1) % 2 == 0);
    CONTRACT(n_rows >= 0 && ldx >= k.dim(1) && lds >= k.dim(0));
    cpu::attention_scores(ex, x, n_rows, ldx, k, p, s, lds);
}

void attention_values(Exec& ex, const float* p, int64_t n_rows, int64_t ldp, const Tensor& v, Precision prec, float* o,
                      int64_t ldo) {
    CONTRACT(v.rank == 2 && (v.dtype == DType::kF32 || v.dtype == DType::kBF16));
    CONTRACT(n_rows >= 0 && ldp >= v.dim(0) && ldo >= v.dim(1));
    cpu::attention_values(ex, p, n_rows, ldp, v, prec, o, ldo);
}

void softmax_rows(Exec& ex, Tensor& x, float scale) {
    CONTRACT(x.rank == 2 && x.dtype == DType::kF32 && x.dim(1) >= 1 && scale > 0.0f);
    cpu::softmax_rows(ex, x, scale);
}

void attn_res_mix(Exec& ex, std::span<const Tensor* const> blocks, const Tensor& partial, const Tensor& score_w,
                  float eps, Tensor& y) {
    CONTRACT(partial.rank == 2 && same_shape(partial, y) && score_w.dtype == DType::kF32 &&
             score_w.numel() == partial.dim(1));
    for (const Tensor* b : blocks) CONTRACT(same_shape(*b, partial) && b->data != y.data);
    cpu::attn_res_mix(ex, blocks, partial, score_w, eps, y);
}

void moe_route(Exec& ex, const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& ids, Tensor& weights) {
    CONTRACT(logits.rank == 2 && logits.dim(1) <= 4096 && bias.numel() == logits.dim(1) && bias.dtype == DType::kF32);
    CONTRACT(p.n_groups >= 1 && logits.dim(1) % p.n_groups == 0 && p.topk_groups >= 1 && p.topk_groups <= p.n_groups);
    CONTRACT(p.top_k >= 1 && p.top_k <= logits.dim(1) / p.n_groups * p.topk_groups);
    CONTRACT(ids.dtype == DType::kI32 && ids.dim(0) == logits.dim(0) && ids.dim(1) == p.top_k &&
             same_shape(ids, weights));
    cpu::moe_route(ex, logits, bias, p, ids, weights);
}

void moe_dispatch(Exec& ex, const Tensor& x, const Tensor& ids, std::span<const uint8_t> local, Tensor& starts,
                  Tensor& row_of, Tensor& xg) {
    CONTRACT(x.rank == 2 && x.dtype == DType::kF32 && ids.rank == 2 && ids.dtype == DType::kI32 &&
             ids.dim(0) == x.dim(0));
    CONTRACT(same_shape(ids, row_of) && row_of.dtype == DType::kI32 && starts.dtype == DType::kI32 &&
             starts.numel() == int64_t(local.size()) + 1);
    CONTRACT(xg.rank == 2 && xg.dtype == DType::kF32 && xg.dim(0) == ids.numel() && xg.dim(1) == x.dim(1));
    for (int64_t i = 0; i < ids.numel(); ++i) CONTRACT(ids.i32()[i] >= 0 && ids.i32()[i] < int64_t(local.size()));
    cpu::moe_dispatch(ex, x, ids, local, starts, row_of, xg);
}

void moe_combine(Exec& ex, const Tensor& yg, const Tensor& row_of, const Tensor& weights, Tensor& y) {
    CONTRACT(yg.rank == 2 && yg.dtype == DType::kF32 && row_of.rank == 2 && row_of.dtype == DType::kI32 &&
             same_shape(row_of, weights) && weights.dtype == DType::kF32);
    CONTRACT(y.rank == 2 && y.dtype == DType::kF32 && y.dim(0) == row_of.dim(0) && y.dim(1) == yg.dim(1) &&
             y.data != yg.data);
    for (int64_t i = 0; i < row_of.numel(); ++i) CONTRACT(row_of.i32()[i] >= -1 && row_of.i32()[i] < yg.dim(0));
    cpu::moe_combine(ex, yg, row_of, weights, y);
}

}   // namespace kimi::ops
