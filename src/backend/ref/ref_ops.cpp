// Scalar reference ops (see ref_ops.h), in the order of the op table. Every element is
// computed in double from the definition and rounded once to f32; the Exec is never used.
// Formulas: docs/model.md#kda, docs/model.md#mla, docs/model.md#moe, docs/model.md#attnres.
#include "backend/ref/ref_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kimi::ref {

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// y[t, o] = Σ_i x[t, i] · w[o, i] for n_rows rows of x (every ldx floats) into rows of y (every
// ldy floats); x rounded to bf16 first in Precision::kBF16.
void product_rows(const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p, float* y, int64_t ldy) {
    const int64_t out = w.dim(0), in = w.dim(1);
    for (int64_t t = 0; t < n_rows; ++t)
        for (int64_t o = 0; o < out; ++o) {
            double acc = 0;
            for (int64_t i = 0; i < in; ++i) {
                const float xv = x[t * ldx + i];
                acc += double(p == Precision::kBF16 ? round_to_bf16(xv) : xv) * element_f32(w, o * in + i);
            }
            y[t * ldy + o] = float(acc);
        }
}

// Offset (in elements) of position `pos` of sequence b in the paged latent cache.
int64_t latent_offset(const PagedLatents& cache, int64_t b, int64_t pos) {
    const int32_t block = cache.block_tables[size_t(b * cache.max_blocks + pos / cache.block_size)];
    return (int64_t(block) * cache.block_size + pos % cache.block_size) * cache.row_width;
}
}   // namespace

// ---- matrix products

void matmul(Exec&, const Tensor& x, const Tensor& w, Precision p, Tensor& y) {
    product_rows(x.f32(), x.dim(0), x.dim(1), w, p, y.f32(), y.dim(1));
}

void matmul_strided(Exec&, const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p, float* y,
                    int64_t ldy) {
    product_rows(x, n_rows, ldx, w, p, y, ldy);
}

void matmul_grouped(Exec&, const Tensor& x, std::span<const Tensor* const> ws, std::span<const int32_t> starts,
                    Precision p, Tensor& y) {
    const int64_t in = x.dim(1), out = y.dim(1);
    for (size_t g = 0; g < ws.size(); ++g) {
        if (starts[g] == starts[g + 1]) continue;   // an empty group's weight may be absent
        product_rows(x.f32() + starts[g] * in, starts[g + 1] - starts[g], in, *ws[g], p, y.f32() + starts[g] * out,
                     out);
    }
}

// ---- normalizations

void rms_norm(Exec&, const Tensor& x, const Tensor& w, float eps, Tensor& y) {
    const int64_t n = x.dim(0), d = x.dim(1);
    for (int64_t t = 0; t < n; ++t) {
        double ss = 0;
        for (int64_t i = 0; i < d; ++i) ss += double(x.f32()[t * d + i]) * x.f32()[t * d + i];
        const double inv = 1.0 / std::sqrt(ss / double(d) + eps);
        for (int64_t i = 0; i < d; ++i) y.f32()[t * d + i] = float(x.f32()[t * d + i] * inv * element_f32(w, i));
    }
}

void l2_norm_heads(Exec&, Tensor& x, float eps, float scale) {
    const int64_t rows = x.dim(0) * x.dim(1), k = x.dim(2);
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < k; ++i) ss += double(x.f32()[r * k + i]) * x.f32()[r * k + i];
        const double f = scale / std::sqrt(ss + eps);
        for (int64_t i = 0; i < k; ++i) x.f32()[r * k + i] = float(x.f32()[r * k + i] * f);
    }
}

void gated_rms_norm(Exec&, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& y) {
    const int64_t rows = x.dim(0) * x.dim(1), v = x.dim(2);
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < v; ++i) ss += double(x.f32()[r * v + i]) * x.f32()[r * v + i];
        const double inv = 1.0 / std::sqrt(ss / double(v) + eps);
        for (int64_t i = 0; i < v; ++i)
            y.f32()[r * v + i] = float(x.f32()[r * v + i] * inv * element_f32(w, i) * sigmoid(z.f32()[r * v + i]));
    }
}

// ---- element-wise

void add_inplace(Exec&, Tensor& acc, const Tensor& a) {
    for (int64_t i = 0; i < acc.numel(); ++i) acc.f32()[i] = float(double(acc.f32()[i]) + double(a.f32()[i]));
}

void embedding(Exec&, const Tensor& table, std::span<const int32_t> ids, Tensor& y) {
    const int64_t d = table.dim(1);
    for (size_t t = 0; t < ids.size(); ++t)
        for (int64_t i = 0; i < d; ++i) y.f32()[int64_t(t) * d + i] = element_f32(table, int64_t(ids[t]) * d + i);
}

void sigmoid_inplace(Exec&, Tensor& x) {
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = float(sigmoid(x.f32()[i]));
}

void mul_sigmoid_inplace(Exec&, Tensor& x, const Tensor& gate) {
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = float(double(x.f32()[i]) * sigmoid(gate.f32()[i]));
}

void silu_mul(Exec&, const Tensor& gate, const Tensor& up, Tensor& y) {
    for (int64_t i = 0; i < y.numel(); ++i) {
        const double g = gate.f32()[i];
        y.f32()[i] = float(g * sigmoid(g) * up.f32()[i]);
    }
}

void situ_mul(Exec&, const Tensor& gate, const Tensor& up, float beta, float linear_beta, Tensor& y) {
    for (int64_t i = 0; i < y.numel(); ++i) {
        const double g = gate.f32()[i], u = up.f32()[i];
        const double b = linear_beta > 0.0f ? double(linear_beta) * std::tanh(u / linear_beta) : u;
        y.f32()[i] = float(double(beta) * std::tanh(g / beta) * sigmoid(g) * b);
    }
}

// ---- vision tower

void gelu_inplace(Exec&, Tensor& x, bool tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI);
    for (int64_t i = 0; i < x.numel(); ++i) {
        const double a = x.f32()[i];
        x.f32()[i] = float(tanh_approx ? 0.5 * a * (1.0 + std::tanh(k * (a + 0.044715 * a * a * a)))
                                       : 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))));
    }
}

void rope_2d(Exec&, Tensor& qkv, int64_t n_heads, int64_t head_dim, int64_t grid_w) {
    const int64_t width = qkv.dim(1);
    for (int64_t t = 0; t < qkv.dim(0); ++t)
        for (int64_t part = 0; part < 2 * n_heads; ++part)
            for (int64_t j = 0; j < head_dim / 2; ++j) {   // complex number j of the head
                const int64_t k = j / 2;
                const double pos = j % 2 == 0 ? double(t % grid_w) : double(t / grid_w);
                const double angle = pos * std::pow(10000.0, -4.0 * double(k) / double(head_dim));
                float* p = qkv.f32() + t * width + part * head_dim + 2 * j;
                const double re = p[0], im = p[1];
                p[0] = float(re * std::cos(angle) - im * std::sin(angle));
                p[1] = float(re * std::sin(angle) + im * std::cos(angle));
            }
}

void attention_scores(Exec&, const float* x, int64_t n_rows, int64_t ldx, const Tensor& k, Precision p, float* s,
                      int64_t lds) {
    product_rows(x, n_rows, ldx, k, p, s, lds);
}

void attention_values(Exec&, const float* p, int64_t n_rows, int64_t ldp, const Tensor& v, Precision prec, float* o,
                      int64_t ldo) {
    const int64_t n = v.dim(0), width = v.dim(1);
    for (int64_t i = 0; i < n_rows; ++i)
        for (int64_t c = 0; c < width; ++c) {
            double sum = 0.0;
            for (int64_t j = 0; j < n; ++j) {
                const float w = p[i * ldp + j];
                const double pw = prec == Precision::kBF16 ? double(bf16_to_f32(f32_to_bf16(w))) : double(w);
                sum += pw * double(element_f32(v, j * width + c));
            }
            o[i * ldo + c] = float(sum);
        }
}

void softmax_rows(Exec&, Tensor& x, float scale) {
    const int64_t cols = x.dim(1);
    for (int64_t r = 0; r < x.dim(0); ++r) {
        float* v = x.f32() + r * cols;
        double m = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < cols; ++j) m = std::max(m, double(v[j]) * scale);
        auto e = std::vector<double>(size_t(cols));
        for (int64_t j = 0; j < cols; ++j) sum += (e[size_t(j)] = std::exp(double(v[j]) * scale - m));
        for (int64_t j = 0; j < cols; ++j) v[j] = float(e[size_t(j)] / sum);
    }
}

// ---- KDA

void causal_conv1d_silu(Exec&, const Tensor& x, const Tensor& w, SlotState state, const SeqLayout& seqs, Tensor& y) {
    const int64_t c_total = x.dim(1), width = w.dim(2);
    for (size_t b = 0; b < seqs.slots.size(); ++b) {
        float* st = state.base + int64_t(seqs.slots[b]) * state.slot_stride;
        const int64_t t0 = seqs.seq_starts[b], t1 = seqs.seq_starts[b + 1];
        for (int64_t c = 0; c < c_total; ++c) {
            // history = the W-1 stored inputs followed by this sequence's new inputs; the window
            // after n tokens is hist[n, n + W-1)
            std::vector<double> hist;
            for (int64_t i = 0; i < width - 1; ++i) hist.push_back(st[i * c_total + c]);
            for (int64_t t = t0; t < t1; ++t) hist.push_back(x.f32()[t * c_total + c]);
            for (int64_t t = t0; t < t1; ++t) {
                double acc = 0;
                for (int64_t i = 0; i < width; ++i) acc += element_f32(w, c * width + i) * hist[size_t(t - t0 + i)];
                y.f32()[t * c_total + c] = float(acc * sigmoid(acc));
            }
            for (const StateCapture& cap : seqs.captures) {
                if (cap.seq != int32_t(b)) continue;
                float* dst = state.base + int64_t(cap.slot) * state.slot_stride;
                for (int64_t i = 0; i < width - 1; ++i) dst[i * c_total + c] = float(hist[size_t(cap.t + i)]);
            }
            for (int64_t i = 0; i < width - 1; ++i) st[i * c_total + c] = float(hist[size_t(t1 - t0 + i)]);
        }
    }
}

void kda_gate(Exec&, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, Tensor& g) {
    const int64_t n = f.dim(0), hk = f.dim(1), k = hk / neg_exp_a.numel();
    for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < hk; ++c)
            g.f32()[t * hk + c] =
                float(double(neg_exp_a.f32()[c / k]) * softplus(double(f.f32()[t * hk + c]) + dt_bias.f32()[c]));
}

void kda_gate_lower_bound(Exec&, const Tensor& f, const Tensor& neg_exp_a, const Tensor& dt_bias, float lower_bound,
                          Tensor& g) {
    const int64_t n = f.dim(0), hk = f.dim(1), k = hk / neg_exp_a.numel();
    for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < hk; ++c) {
            const double x = double(f.f32()[t * hk + c]) + dt_bias.f32()[c];
            g.f32()[t * hk + c] = float(double(lower_bound) * sigmoid(-double(neg_exp_a.f32()[c / k]) * x));
        }
}

void kda_recurrent(Exec&, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                   SlotState state, const SeqLayout& seqs, Tensor& o) {
    const int64_t n_heads = q.dim(1), dk = q.dim(2), dv = v.dim(2);
    for (size_t b = 0; b < seqs.slots.size(); ++b)
        for (int64_t h = 0; h < n_heads; ++h) {
            float* sp = state.base + int64_t(seqs.slots[b]) * state.slot_stride + h * dk * dv;
            std::vector<double> s(sp, sp + dk * dv);
            const int64_t t0 = seqs.seq_starts[b];
            for (int64_t t = t0; t < seqs.seq_starts[b + 1]; ++t) {
                const int64_t row = t * n_heads + h;
                std::vector<double> u(size_t(dv), 0.0);
                for (int64_t d = 0; d < dk; ++d)
                    for (int64_t j = 0; j < dv; ++j) {
                        s[size_t(d * dv + j)] *= std::exp(double(g.f32()[row * dk + d]));
                        u[size_t(j)] += double(k.f32()[row * dk + d]) * s[size_t(d * dv + j)];
                    }
                for (int64_t j = 0; j < dv; ++j)
                    u[size_t(j)] = beta.f32()[row] * (v.f32()[row * dv + j] - u[size_t(j)]);
                for (int64_t j = 0; j < dv; ++j) {
                    double acc = 0;
                    for (int64_t d = 0; d < dk; ++d) {
                        s[size_t(d * dv + j)] += double(k.f32()[row * dk + d]) * u[size_t(j)];
                        acc += double(q.f32()[row * dk + d]) * s[size_t(d * dv + j)];
                    }
                    o.f32()[row * dv + j] = float(acc);
                }
                for (const StateCapture& cap : seqs.captures)   // the state after the first cap.t tokens
                    if (cap.seq == int32_t(b) && t - t0 + 1 == cap.t) {
                        float* dst = state.base + int64_t(cap.slot) * state.slot_stride + h * dk * dv;
                        for (int64_t i = 0; i < dk * dv; ++i) dst[i] = float(s[size_t(i)]);
                    }
            }
            for (int64_t i = 0; i < dk * dv; ++i) sp[i] = float(s[size_t(i)]);
        }
}

// ---- MLA

void mla_cache_write(Exec&, const Tensor& latents, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                     std::span<const int32_t> n_past) {
    const int64_t w = latents.dim(1);
    for (size_t b = 0; b + 1 < seq_starts.size(); ++b)
        for (int64_t t = seq_starts[b]; t < seq_starts[b + 1]; ++t) {
            const int64_t off = latent_offset(cache, int64_t(b), n_past[b] + (t - seq_starts[b]));
            for (int64_t i = 0; i < w; ++i) {
                const float v = latents.f32()[t * w + i];
                if (cache.base)
                    cache.base[off + i] = v;
                else
                    cache.base_bf16[off + i] = f32_to_bf16(v);
            }
        }
}

void mla_attention(Exec&, const Tensor& q_abs, const PagedLatents& cache, std::span<const int32_t> seq_starts,
                   std::span<const int32_t> n_past, float scale, Tensor& o_lat) {
    const int64_t n_heads = q_abs.dim(1), width = q_abs.dim(2), rank = o_lat.dim(2);
    for (size_t b = 0; b + 1 < seq_starts.size(); ++b)
        for (int64_t t = seq_starts[b]; t < seq_starts[b + 1]; ++t) {
            const int64_t ctx = n_past[b] + (t - seq_starts[b]) + 1;
            for (int64_t h = 0; h < n_heads; ++h) {
                const float* q = q_abs.f32() + (t * n_heads + h) * width;
                std::vector<double> s(static_cast<size_t>(ctx));
                std::vector<std::vector<double>> rows(static_cast<size_t>(ctx));
                for (int64_t j = 0; j < ctx; ++j) {
                    const int64_t off = latent_offset(cache, int64_t(b), j);
                    for (int64_t i = 0; i < cache.row_width; ++i)
                        rows[size_t(j)].push_back(cache.base ? double(cache.base[off + i])
                                                             : double(bf16_to_f32(cache.base_bf16[off + i])));
                    double acc = 0;
                    for (int64_t i = 0; i < width; ++i) acc += double(q[i]) * rows[size_t(j)][size_t(i)];
                    s[size_t(j)] = acc * scale;
                }
                const double m = *std::max_element(s.begin(), s.end());
                double sum = 0;
                for (auto& e : s) sum += (e = std::exp(e - m));
                for (int64_t r = 0; r < rank; ++r) {
                    double acc = 0;
                    for (int64_t j = 0; j < ctx; ++j) acc += s[size_t(j)] / sum * rows[size_t(j)][size_t(r)];
                    o_lat.f32()[(t * n_heads + h) * rank + r] = float(acc);
                }
            }
        }
}

// ---- residual mixing and routing

void attn_res_mix(Exec&, std::span<const Tensor* const> blocks, const Tensor& partial, const Tensor& score_w, float eps,
                  Tensor& y) {
    const int64_t n = partial.dim(0), d = partial.dim(1);
    std::vector<const Tensor*> entries(blocks.begin(), blocks.end());
    entries.push_back(&partial);
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> s;
        for (const Tensor* e : entries) {
            double ss = 0, dot = 0;
            for (int64_t j = 0; j < d; ++j) {
                const double v = e->f32()[t * d + j];
                ss += v * v;
                dot += v * score_w.f32()[j];
            }
            s.push_back(dot / std::sqrt(ss / double(d) + eps));
        }
        const double top = *std::max_element(s.begin(), s.end());
        double total = 0;
        for (double& v : s) total += (v = std::exp(v - top));
        for (int64_t j = 0; j < d; ++j) {
            double acc = 0;
            for (size_t i = 0; i < entries.size(); ++i) acc += s[i] / total * entries[i]->f32()[t * d + j];
            y.f32()[t * d + j] = float(acc);
        }
    }
}

void moe_route(Exec&, const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& ids, Tensor& weights) {
    const int64_t n = logits.dim(0), n_exp = logits.dim(1), per_group = n_exp / p.n_groups;
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> s(static_cast<size_t>(n_exp)), sel(static_cast<size_t>(n_exp));
        for (int64_t e = 0; e < n_exp; ++e) {
            s[size_t(e)] = sigmoid(logits.f32()[t * n_exp + e]);
            sel[size_t(e)] = s[size_t(e)] + bias.f32()[e];
        }
        std::vector<int64_t> order(static_cast<size_t>(n_exp));
        if (p.n_groups > 1) {
            std::vector<std::pair<double, int64_t>> groups;
            for (int64_t g = 0; g < p.n_groups; ++g) {
                std::vector<double> m(sel.begin() + g * per_group, sel.begin() + (g + 1) * per_group);
                std::sort(m.rbegin(), m.rend());
                groups.push_back({-(m[0] + (m.size() > 1 ? m[1] : 0.0)), g});
            }
            std::stable_sort(groups.begin(), groups.end());
            std::vector<bool> keep(size_t(p.n_groups), false);
            for (int64_t r = 0; r < p.topk_groups; ++r) keep[size_t(groups[size_t(r)].second)] = true;
            for (int64_t e = 0; e < n_exp; ++e)
                if (!keep[size_t(e / per_group)]) sel[size_t(e)] = -INFINITY;
        }
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return sel[size_t(a)] > sel[size_t(b)]; });
        double total = 0;
        for (int64_t r = 0; r < p.top_k; ++r) total += s[size_t(order[size_t(r)])];
        for (int64_t r = 0; r < p.top_k; ++r) {
            ids.i32()[t * p.top_k + r] = int32_t(order[size_t(r)]);
            const double w = s[size_t(order[size_t(r)])];
            weights.f32()[t * p.top_k + r] = float((p.renormalize ? w / total : w) * p.scale);
        }
    }
}

// The pairs in (token, slot) order, each expert's in turn: a plain stable sort by expert.
void moe_dispatch(Exec&, const Tensor& x, const Tensor& ids, std::span<const uint8_t> local, Tensor& starts,
                  Tensor& row_of, Tensor& xg) {
    const int64_t pairs = ids.numel(), k = ids.dim(1), in = x.dim(1), n_exp = int64_t(local.size());
    int32_t next = 0;
    for (int64_t e = 0; e < n_exp; ++e) {
        starts.i32()[e] = next;
        for (int64_t i = 0; i < pairs; ++i) {
            if (ids.i32()[i] != e) continue;
            if (!local[size_t(e)]) {
                row_of.i32()[i] = -1;
                continue;
            }
            row_of.i32()[i] = next;
            for (int64_t j = 0; j < in; ++j) xg.f32()[int64_t(next) * in + j] = x.f32()[(i / k) * in + j];
            ++next;
        }
    }
    starts.i32()[n_exp] = next;
}

void moe_combine(Exec&, const Tensor& yg, const Tensor& row_of, const Tensor& weights, Tensor& y) {
    const int64_t n = y.dim(0), in = y.dim(1), k = row_of.dim(1);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < in; ++j) {
            double acc = 0.0;
            for (int64_t s = 0; s < k; ++s) {
                const int32_t r = row_of.i32()[t * k + s];
                if (r >= 0) acc += double(weights.f32()[t * k + s]) * yg.f32()[int64_t(r) * in + j];
            }
            y.f32()[t * in + j] = float(acc);
        }
}

}   // namespace kimi::ref
