// Every op's CPU kernel against its scalar reference (backend/ref), on odd shapes, with 1
// and 2 threads; plus the row-invariance the model relies on (a row's result does not
// depend on the other rows or on the thread count).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kda_kernel.h"
#include "backend/cpu/matmul_kernel.h"
#include "backend/ref/ref_ops.h"
#include "core/rng.h"
#include "ops/ops.h"
#include "test_models.h"

namespace kimi {
namespace {

struct Buf {
    std::vector<unsigned char> bytes;
    Tensor t;
    Buf(DType dt, std::initializer_list<int64_t> shape, Rng* r = nullptr, double scale = 1.0) {
        t = Tensor(nullptr, dt, shape);
        bytes.assign(t.nbytes() + 64, 0);
        t.data = bytes.data();
        if (!r) return;
        for (int64_t i = 0; i < t.numel(); ++i) {
            const float v = float(r->normal() * scale);
            if (dt == DType::kF32) t.f32()[i] = v;
            else if (dt == DType::kBF16) static_cast<uint16_t*>(t.data)[i] = f32_to_bf16(v);
            else if (dt == DType::kF16) static_cast<uint16_t*>(t.data)[i] = f32_to_f16(v);
        }
    }
    float* f() { return t.f32(); }
};

// max |a - b| / max(|b|, floor)
double rel_err(const Tensor& a, const Tensor& b, double floor = 1e-6) {
    double m = 0, d = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
        m = std::max(m, double(std::fabs(b.f32()[i])));
        d = std::max(d, double(std::fabs(a.f32()[i] - b.f32()[i])));
    }
    return d / std::max(m, floor);
}

class Ops : public ::testing::TestWithParam<int> {
protected:
    test::Runner r{GetParam()};
};

TEST_P(Ops, Matmul) {
    Rng rng(1);
    for (DType wt : {DType::kBF16, DType::kF16, DType::kF32})
        for (auto [t, in, out] : {std::tuple{1, 1, 1}, {1, 7, 3}, {3, 8, 5}, {5, 33, 17}, {2, 64, 64}, {7, 130, 37}, {16, 256, 19}})
            for (Precision p : {Precision::kF32, Precision::kBF16}) {
                Buf x(DType::kF32, {t, in}, &rng), w(wt, {out, in}, &rng, 0.1), y(DType::kF32, {t, out}), yr(DType::kF32, {t, out});
                ops::matmul(r.ex, x.t, w.t, p, y.t);
                ref::matmul(x.t, w.t, p, yr.t);
                EXPECT_LT(rel_err(y.t, yr.t), 2e-6) << "T=" << t << " I=" << in << " O=" << out << " w=" << dtype_name(wt);
            }
}

TEST_P(Ops, MatmulRowsIndependentOfBatch) {
    Rng rng(2);
    const int64_t in = 77, out = 45;
    Buf x(DType::kF32, {9, in}, &rng), w(DType::kBF16, {out, in}, &rng), y(DType::kF32, {9, out});
    ops::matmul(r.ex, x.t, w.t, Precision::kBF16, y.t);
    for (int64_t t = 0; t < 9; ++t) {
        Tensor xr = x.t.rows(t, t + 1);
        Buf y1(DType::kF32, {1, out});
        ops::matmul(r.ex, xr, w.t, Precision::kBF16, y1.t);
        EXPECT_EQ(0, std::memcmp(y1.f(), y.f() + t * out, size_t(out) * 4)) << "row " << t;
    }
}

// The kernels switch path with the number of token rows (direct from memory for few rows,
// widened and cache-blocked for many) and block the reduction in chunks: every row of every
// batch size must still match the one-row product bit for bit, and the scalar reference.
TEST_P(Ops, MatmulPathsAgreeBitForBit) {
    Rng rng(12);
    for (Precision p : {Precision::kF32, Precision::kBF16})
        for (DType wt : {DType::kBF16, DType::kF16, DType::kF32})
            for (auto [in, out] : {std::pair{2311, 53}, {520, 100}, {9219, 7}}) {
                const int64_t max_t = 21;
                Buf x(DType::kF32, {max_t, in}, &rng), w(wt, {out, in}, &rng, 0.05);
                std::vector<Buf> single;
                for (int64_t t = 0; t < max_t; ++t) {
                    single.emplace_back(DType::kF32, std::initializer_list<int64_t>{1, out});
                    ops::matmul(r.ex, x.t.rows(t, t + 1), w.t, p, single.back().t);
                }
                for (int64_t n : {2, 3, 4, 5, 8, 16, 17, 21}) {
                    Buf y(DType::kF32, {n, out}), yr(DType::kF32, {n, out});
                    const Tensor xs = x.t.rows(0, n);
                    ops::matmul(r.ex, xs, w.t, p, y.t);
                    ref::matmul(xs, w.t, p, yr.t);
                    const std::string what = "n=" + std::to_string(n) + " I=" + std::to_string(in) + " w=" + dtype_name(wt) +
                                             (p == Precision::kBF16 ? " bf16" : " f32");
                    EXPECT_LT(rel_err(y.t, yr.t), 2e-6) << what;
                    for (int64_t t = 0; t < n; ++t)
                        ASSERT_EQ(0, std::memcmp(single[size_t(t)].f(), y.f() + t * out, size_t(out) * 4)) << "row " << t << " " << what;
                }
            }
}

TEST_P(Ops, Norms) {
    Rng rng(3);
    for (auto [t, d] : {std::pair{1, 1}, {3, 7}, {4, 64}, {2, 129}}) {
        Buf x(DType::kF32, {t, d}, &rng), w(DType::kBF16, {d}, &rng), y(DType::kF32, {t, d}), yr(DType::kF32, {t, d});
        ops::rms_norm(r.ex, x.t, w.t, 1e-5f, y.t);
        ref::rms_norm(x.t, w.t, 1e-5f, yr.t);
        EXPECT_LT(rel_err(y.t, yr.t), 1e-6);
        Buf a(DType::kF32, {t, 3, d}, &rng), b(DType::kF32, {t, 3, d});
        std::memcpy(b.f(), a.f(), a.t.nbytes());
        ops::l2_norm_heads(r.ex, a.t, 1e-6f, 0.25f);
        ref::l2_norm_heads(b.t, 1e-6f, 0.25f);
        EXPECT_LT(rel_err(a.t, b.t), 1e-6);
        Buf o(DType::kF32, {t, 3, d}, &rng), z(DType::kF32, {t, 3, d}, &rng), g(DType::kF32, {d}, &rng);
        Buf go(DType::kF32, {t, 3, d}), gr(DType::kF32, {t, 3, d});
        ops::gated_rms_norm(r.ex, o.t, g.t, z.t, 1e-5f, go.t);
        ref::gated_rms_norm(o.t, g.t, z.t, 1e-5f, gr.t);
        EXPECT_LT(rel_err(go.t, gr.t), 1e-6);
    }
}

TEST_P(Ops, ElementwiseAndGate) {
    Rng rng(4);
    const int64_t t = 5, h = 3, k = 6;
    Buf f(DType::kF32, {t, h * k}, &rng, 8.0), a(DType::kF32, {h}), bias(DType::kF32, {h * k}, &rng);
    for (int i = 0; i < h; ++i) a.f()[i] = -float(i + 1);
    Buf g(DType::kF32, {t, h * k}), gr(DType::kF32, {t, h * k});
    ops::kda_gate(r.ex, f.t, a.t, bias.t, g.t);
    ref::kda_gate(f.t, a.t, bias.t, gr.t);
    EXPECT_LT(rel_err(g.t, gr.t), 1e-6);
    Buf u(DType::kF32, {t, 9}, &rng), v(DType::kF32, {t, 9}, &rng), s(DType::kF32, {t, 9}), sr(DType::kF32, {t, 9});
    ops::silu_mul(r.ex, u.t, v.t, s.t);
    ref::silu_mul(u.t, v.t, sr.t);
    EXPECT_LT(rel_err(s.t, sr.t), 1e-6);
    Buf q(DType::kF32, {10001}, &rng, 5.0);
    std::vector<float> before(q.f(), q.f() + 10001);
    ops::sigmoid_inplace(r.ex, q.t);
    for (int i = 0; i < 10001; ++i) EXPECT_NEAR(q.f()[i], 1.0 / (1.0 + std::exp(-double(before[size_t(i)]))), 1e-6);
}

// Kimi-K3 ops: the lower-bound forget gate (range, and the reference), SiTU·mul with and
// without the linear β (large inputs reach tanh's saturation), the sigmoid output gate.
TEST_P(Ops, K3GateActivationAndOutputGate) {
    Rng rng(6);
    const int64_t t = 7, h = 5, k = 6;
    Buf f(DType::kF32, {t, h * k}, &rng, 6.0), a(DType::kF32, {h}), bias(DType::kF32, {h * k}, &rng);
    for (int i = 0; i < h; ++i) a.f()[i] = -std::exp(float(i) - 2.0f);   // −exp(A_log), A_log in [−2, 2]
    for (float lb : {-5.0f, -0.5f}) {
        Buf g(DType::kF32, {t, h * k}), gr(DType::kF32, {t, h * k});
        ops::kda_gate_lower_bound(r.ex, f.t, a.t, bias.t, lb, g.t);
        ref::kda_gate_lower_bound(f.t, a.t, bias.t, lb, gr.t);
        EXPECT_LT(rel_err(g.t, gr.t), 1e-6) << "lower bound " << lb;
        for (int64_t i = 0; i < g.t.numel(); ++i) {
            EXPECT_GE(g.f()[i], lb);
            EXPECT_LE(g.f()[i], 0.0f);
        }
        // in place (f aliases g), as the layer calls it
        Buf fa(DType::kF32, {t, h * k});
        std::memcpy(fa.f(), f.f(), f.t.nbytes());
        ops::kda_gate_lower_bound(r.ex, fa.t, a.t, bias.t, lb, fa.t);
        EXPECT_EQ(0, std::memcmp(fa.f(), g.f(), g.t.nbytes()));
    }
    for (int64_t n : {1, 9, 4099})
        for (auto [beta, lin] : {std::pair{4.0f, 25.0f}, {4.0f, 0.0f}, {1.0f, 2.5f}}) {
            Buf u(DType::kF32, {n}, &rng, 12.0), v(DType::kF32, {n}, &rng, 40.0), s(DType::kF32, {n}), sr(DType::kF32, {n});
            ops::situ_mul(r.ex, u.t, v.t, beta, lin, s.t);
            ref::situ_mul(u.t, v.t, beta, lin, sr.t);
            EXPECT_LT(rel_err(s.t, sr.t), 2e-6) << "n=" << n << " beta=" << beta << " linear_beta=" << lin;
            // bounds: |gate part| < β and |up part| ≤ β_lin (when set)
            for (int64_t i = 0; i < n && lin > 0; ++i) EXPECT_LE(std::fabs(s.f()[i]), beta * lin * 1.0001f);
        }
    Buf x(DType::kF32, {t, 13}, &rng), z(DType::kF32, {t, 13}, &rng, 4.0), xr(DType::kF32, {t, 13});
    std::memcpy(xr.f(), x.f(), x.t.nbytes());
    ops::mul_sigmoid_inplace(r.ex, x.t, z.t);
    ref::mul_sigmoid_inplace(xr.t, z.t);
    EXPECT_LT(rel_err(x.t, xr.t), 1e-6);
}

// Block AttnRes mix vs the reference, for 0..4 banked blocks, odd widths; a token's result
// does not depend on the other tokens; with one block equal to the partial sum the mix
// returns it (the softmax weights sum to 1).
TEST_P(Ops, AttnResMix) {
    Rng rng(7);
    for (auto [t, d] : {std::pair{1, 1}, {3, 7}, {5, 64}, {2, 131}})
        for (size_t nb : {0, 1, 2, 4}) {
            std::vector<Buf> blocks;
            for (size_t i = 0; i < nb; ++i) blocks.emplace_back(DType::kF32, std::initializer_list<int64_t>{t, d}, &rng, double(i + 1));
            std::vector<const Tensor*> bp;
            for (auto& b : blocks) bp.push_back(&b.t);
            Buf p(DType::kF32, {t, d}, &rng, 3.0), w(DType::kF32, {d}, &rng, 0.3), y(DType::kF32, {t, d}), yr(DType::kF32, {t, d});
            ops::attn_res_mix(r.ex, bp, p.t, w.t, 1e-5f, y.t);
            ref::attn_res_mix(bp, p.t, w.t, 1e-5f, yr.t);
            EXPECT_LT(rel_err(y.t, yr.t), 2e-6) << "T=" << t << " D=" << d << " blocks=" << nb;
            for (int64_t row = 0; row < t; ++row) {   // one token alone
                std::vector<Tensor> rows;
                for (auto& b : blocks) rows.push_back(b.t.rows(row, row + 1));
                std::vector<const Tensor*> rp;
                for (auto& x : rows) rp.push_back(&x);
                Buf y1(DType::kF32, {1, d});
                ops::attn_res_mix(r.ex, rp, p.t.rows(row, row + 1), w.t, 1e-5f, y1.t);
                EXPECT_EQ(0, std::memcmp(y1.f(), y.f() + row * d, size_t(d) * 4)) << "row " << row;
            }
        }
    Buf p(DType::kF32, {2, 9}, &rng), w(DType::kF32, {9}, &rng), y(DType::kF32, {2, 9});
    const Tensor* same[] = {&p.t, &p.t};
    ops::attn_res_mix(r.ex, same, p.t, w.t, 1e-5f, y.t);
    for (int64_t i = 0; i < 18; ++i) EXPECT_NEAR(y.f()[i], p.f()[i], 1e-6 * (1 + std::fabs(p.f()[i])));
}

// Two sequences in one step with given state slots; the conv and the recurrence continue
// from the stored state.
TEST_P(Ops, ConvAndRecurrenceVarlen) {
    Rng rng(5);
    const int64_t h = 3, k = 5, v = 7, c = h * k, w = 4;
    const std::vector<int32_t> starts{0, 6, 9}, slots{2, 0};
    const ops::SeqLayout seqs{starts, slots};
    const int64_t t = 9, n_slots = 3;
    Buf x(DType::kF32, {t, c}, &rng), cw(DType::kF32, {c, 1, w}, &rng, 0.5), y(DType::kF32, {t, c}), yr(DType::kF32, {t, c});
    Buf st(DType::kF32, {n_slots, w - 1, c}, &rng), str(DType::kF32, {n_slots, w - 1, c});
    std::memcpy(str.f(), st.f(), st.t.nbytes());
    ops::causal_conv1d_silu(r.ex, x.t, cw.t, {st.f(), (w - 1) * c}, seqs, y.t);
    ref::causal_conv1d_silu(x.t, cw.t, {str.f(), (w - 1) * c}, seqs, yr.t);
    EXPECT_LT(rel_err(y.t, yr.t), 1e-6);
    EXPECT_LT(rel_err(st.t, str.t), 1e-7);

    Buf q(DType::kF32, {t, h, k}, &rng, 0.3), kk(DType::kF32, {t, h, k}, &rng, 0.3), vv(DType::kF32, {t, h, v}, &rng);
    Buf g(DType::kF32, {t, h, k}, &rng, 0.2), beta(DType::kF32, {t, h});
    for (int64_t i = 0; i < g.t.numel(); ++i) g.f()[i] = -std::fabs(g.f()[i]);
    for (int64_t i = 0; i < beta.t.numel(); ++i) beta.f()[i] = float(rng.uniform());
    Buf s(DType::kF32, {n_slots, h, k, v}, &rng, 0.1), sr(DType::kF32, {n_slots, h, k, v});
    std::memcpy(sr.f(), s.f(), s.t.nbytes());
    Buf o(DType::kF32, {t, h, v}), orf(DType::kF32, {t, h, v});
    ops::kda_recurrent(r.ex, q.t, kk.t, vv.t, g.t, beta.t, {s.f(), h * k * v}, seqs, o.t);
    ref::kda_recurrent(q.t, kk.t, vv.t, g.t, beta.t, {sr.f(), h * k * v}, seqs, orf.t);
    EXPECT_LT(rel_err(o.t, orf.t), 1e-5);
    EXPECT_LT(rel_err(s.t, sr.t), 1e-5);
}

// Prefix-cache captures: the conv window and the KDA state of a sequence after its first t
// tokens of a step, copied into another slot mid-step, are bit for bit what running only
// those t tokens leaves; outputs and the running slots' final states are unchanged.
TEST_P(Ops, StateCapturesMidSequence) {
    Rng rng(15);
    const int64_t h = 2, k = 6, v = 5, c = h * k, w = 4, t = 9, n_slots = 5;
    const std::vector<int32_t> starts{0, 6, 9}, slots{2, 0};
    const std::vector<ops::StateCapture> caps{{0, 2, 1}, {0, 5, 3}, {1, 1, 4}};
    const ops::SeqLayout plain{starts, slots}, captured{starts, slots, caps};
    Buf x(DType::kF32, {t, c}, &rng), cw(DType::kF32, {c, 1, w}, &rng, 0.5);
    Buf q(DType::kF32, {t, h, k}, &rng, 0.3), kk(DType::kF32, {t, h, k}, &rng, 0.3), vv(DType::kF32, {t, h, v}, &rng);
    Buf g(DType::kF32, {t, h, k}, &rng, 0.2), beta(DType::kF32, {t, h});
    for (int64_t i = 0; i < g.t.numel(); ++i) g.f()[i] = -std::fabs(g.f()[i]);
    for (int64_t i = 0; i < beta.t.numel(); ++i) beta.f()[i] = float(rng.uniform());
    Buf st0(DType::kF32, {n_slots, w - 1, c}, &rng), s0(DType::kF32, {n_slots, h, k, v}, &rng, 0.1);
    const int64_t conv_stride = (w - 1) * c, kda_stride = h * k * v;
    struct Run {
        Buf st, s, y, o;
    };
    auto run = [&](const ops::SeqLayout& seqs) {
        Run out{Buf(DType::kF32, {n_slots, w - 1, c}), Buf(DType::kF32, {n_slots, h, k, v}), Buf(DType::kF32, {t, c}),
                Buf(DType::kF32, {t, h, v})};
        std::memcpy(out.st.f(), st0.f(), st0.t.nbytes());
        std::memcpy(out.s.f(), s0.f(), s0.t.nbytes());
        ops::causal_conv1d_silu(r.ex, x.t, cw.t, {out.st.f(), conv_stride}, seqs, out.y.t);
        ops::kda_recurrent(r.ex, q.t, kk.t, vv.t, g.t, beta.t, {out.s.f(), kda_stride}, seqs, out.o.t);
        return out;
    };
    Run a = run(plain), b = run(captured);
    EXPECT_EQ(0, std::memcmp(a.y.f(), b.y.f(), a.y.t.nbytes()));
    EXPECT_EQ(0, std::memcmp(a.o.f(), b.o.f(), a.o.t.nbytes()));
    for (int32_t slot : slots) {
        EXPECT_EQ(0, std::memcmp(a.st.f() + slot * conv_stride, b.st.f() + slot * conv_stride, size_t(conv_stride) * 4));
        EXPECT_EQ(0, std::memcmp(a.s.f() + slot * kda_stride, b.s.f() + slot * kda_stride, size_t(kda_stride) * 4));
    }
    for (const ops::StateCapture& cap : caps) {   // the first cap.t tokens of that sequence alone
        const int32_t from = starts[size_t(cap.seq)];
        const std::vector<int32_t> one_start{0, cap.t}, one_slot{slots[size_t(cap.seq)]};
        const ops::SeqLayout one{one_start, one_slot};
        Buf st(DType::kF32, {n_slots, w - 1, c}), s(DType::kF32, {n_slots, h, k, v}), y(DType::kF32, {cap.t, c}),
            o(DType::kF32, {cap.t, h, v});
        std::memcpy(st.f(), st0.f(), st0.t.nbytes());
        std::memcpy(s.f(), s0.f(), s0.t.nbytes());
        ops::causal_conv1d_silu(r.ex, x.t.rows(from, from + cap.t), cw.t, {st.f(), conv_stride}, one, y.t);
        ops::kda_recurrent(r.ex, q.t.rows(from, from + cap.t), kk.t.rows(from, from + cap.t), vv.t.rows(from, from + cap.t),
                           g.t.rows(from, from + cap.t), beta.t.rows(from, from + cap.t), {s.f(), kda_stride}, one, o.t);
        EXPECT_EQ(0, std::memcmp(st.f() + one_slot[0] * conv_stride, b.st.f() + cap.slot * conv_stride, size_t(conv_stride) * 4))
            << "conv capture seq " << cap.seq << " t " << cap.t;
        EXPECT_EQ(0, std::memcmp(s.f() + one_slot[0] * kda_stride, b.s.f() + cap.slot * kda_stride, size_t(kda_stride) * 4))
            << "state capture seq " << cap.seq << " t " << cap.t;
    }
}

// The KDA recurrence compiled portably and with AVX-512 (auto-vectorized): the same bits,
// so a machine's choice of kernel never changes the KDA state or output.
TEST(KdaKernels, PortableAndAvx512AgreeBitForBit) {
    if (!cpu::use_avx512()) GTEST_SKIP() << "no AVX-512 kernel on this machine";
    Rng rng(21);
    for (auto [dk, dv] : {std::pair<int64_t, int64_t>{128, 128}, {24, 37}}) {
        const int64_t t = 5;
        Buf q(DType::kF32, {t, dk}, &rng, 0.3), k(DType::kF32, {t, dk}, &rng, 0.3), v(DType::kF32, {t, dv}, &rng);
        Buf g(DType::kF32, {t, dk}, &rng, 0.2), beta(DType::kF32, {t}, &rng), s0(DType::kF32, {dk, dv}, &rng);
        for (int64_t i = 0; i < g.t.numel(); ++i) g.f()[i] = -std::fabs(g.f()[i]);
        Buf sa(DType::kF32, {dk, dv}), sb(DType::kF32, {dk, dv}), oa(DType::kF32, {t, dv}), ob(DType::kF32, {t, dv});
        std::memcpy(sa.f(), s0.f(), s0.t.nbytes());
        std::memcpy(sb.f(), s0.f(), s0.t.nbytes());
        cpu::KdaHeadArgs a{q.f(), k.f(), v.f(), g.f(), beta.f(), oa.f(), dk, dv, 1, 0, t, dk, dv, sa.f()};
        alignas(64) float u[512];
        cpu::kda_head_portable(a, u);
        a.o = ob.f();
        a.state = sb.f();
        cpu::kda_head_avx512(a, u);
        EXPECT_EQ(0, std::memcmp(oa.f(), ob.f(), oa.t.nbytes())) << dk << "x" << dv;
        EXPECT_EQ(0, std::memcmp(sa.f(), sb.f(), sa.t.nbytes())) << dk << "x" << dv;
    }
}

// Rounding activations to bf16: the vectorized AVX-512 build gives the bits of the scalar one,
// ties, NaNs, infinities and subnormals included.
TEST(Bf16Rounding, PortableAndAvx512AgreeBitForBit) {
    if (!cpu::use_avx512()) GTEST_SKIP() << "no AVX-512 kernel on this machine";
    Rng rng(22);
    const int64_t rows = 3, in = 77, ldx = 80;
    std::vector<float> x(size_t(rows * ldx));
    for (auto& v : x) v = float(rng.normal()) * 100.0f;
    const uint32_t special[] = {0x7fc00001u, 0xff800000u, 0x7f800000u, 0x00000001u, 0x80400000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu};
    for (size_t i = 0; i < std::size(special); ++i) std::memcpy(&x[i * 3], &special[i], 4);
    std::vector<float> ra(size_t(rows * in)), rb(size_t(rows * in));
    std::vector<uint16_t> ba(size_t(rows * in)), bb(size_t(rows * in));
    cpu::bf16_round_rows_portable(x.data(), rows, ldx, in, ra.data(), ba.data());
    cpu::bf16_round_rows_avx512(x.data(), rows, ldx, in, rb.data(), bb.data());
    EXPECT_EQ(0, std::memcmp(ra.data(), rb.data(), ra.size() * 4));
    EXPECT_EQ(ba, bb);
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t i = 0; i < in; ++i) ASSERT_EQ(ba[size_t(t * in + i)], f32_to_bf16(x[size_t(t * ldx + i)]));
}

TEST_P(Ops, MlaAttentionPaged) {
    Rng rng(6);
    const int64_t h = 3, rank = 10, rope = 3, width = rank + rope;
    const int32_t bs = 4, max_blocks = 5;
    const std::vector<int32_t> starts{0, 5, 6}, past{3, 9};   // seq 0: 5 new after 3; seq 1: 1 new after 9
    const std::vector<int32_t> tables{7, 2, 9, 0, 0, 4, 1, 8, 3, 0};
    Buf cache(DType::kF32, {10, bs, width}, &rng);
    const ops::PagedLatents pl{cache.f(), nullptr, bs, width, tables, max_blocks};
    Buf lat(DType::kF32, {6, width}, &rng);
    ops::mla_cache_write(r.ex, lat.t, pl, starts, past);
    Buf q(DType::kF32, {6, h, width}, &rng), o(DType::kF32, {6, h, rank}), orf(DType::kF32, {6, h, rank});
    ops::mla_attention(r.ex, q.t, pl, starts, past, 0.3f, o.t);
    ref::mla_attention(q.t, pl, starts, past, 0.3f, orf.t);
    EXPECT_LT(rel_err(o.t, orf.t), 1e-5);
    // the new latents landed where the block table says
    const int64_t pos = 3;   // seq 0, first new token → block tables[0 + 3/4] = 7, row 3
    EXPECT_EQ(0, std::memcmp(cache.f() + (7 * bs + pos % bs) * width, lat.f(), size_t(width) * 4));
    // a bf16 cache (--kv-cache-dtype bf16): latents rounded to nearest even when written, the
    // same attention over the widened rows as the reference reads them
    std::vector<uint16_t> cache16(size_t(10 * bs * width));
    for (size_t i = 0; i < cache16.size(); ++i) cache16[i] = f32_to_bf16(cache.f()[i]);
    ops::PagedLatents pl16{nullptr, cache16.data(), bs, width, tables, max_blocks};
    ops::mla_cache_write(r.ex, lat.t, pl16, starts, past);
    EXPECT_EQ(cache16[size_t((7 * bs + pos % bs) * width)], f32_to_bf16(lat.f()[0]));
    Buf o16(DType::kF32, {6, h, rank}), o16r(DType::kF32, {6, h, rank});
    ops::mla_attention(r.ex, q.t, pl16, starts, past, 0.3f, o16.t);
    ref::mla_attention(q.t, pl16, starts, past, 0.3f, o16r.t);
    EXPECT_LT(rel_err(o16.t, o16r.t), 1e-5);
    EXPECT_LT(rel_err(o16.t, o.t), 2e-2);   // and close to the f32 cache (bf16 rounding)
}

TEST_P(Ops, MlaAttentionLongContextTiles) {
    // Several online-softmax tiles, a head group of 8 plus a remainder, 32-column chunks plus
    // a tail: against the reference, and each token alone == all tokens in one call, bit for bit.
    Rng rng(16);
    const int64_t h = 11, rank = 40, rope = 5, width = rank + rope, n_new = 3;
    const int32_t bs = 16, max_blocks = 20, past = 290;
    std::vector<int32_t> tables(static_cast<size_t>(max_blocks));
    for (int32_t i = 0; i < max_blocks; ++i) tables[size_t(i)] = (i * 7 + 3) % max_blocks;   // a permutation
    for (bool bf16 : {false, true}) {
        Buf cache(DType::kF32, {max_blocks, bs, width}, &rng);
        std::vector<uint16_t> cache16(size_t(max_blocks * bs * width));
        for (size_t i = 0; i < cache16.size(); ++i) cache16[i] = f32_to_bf16(cache.f()[i]);
        const ops::PagedLatents pl{bf16 ? nullptr : cache.f(), bf16 ? cache16.data() : nullptr, bs, width, tables, max_blocks};
        Buf q(DType::kF32, {n_new, h, width}, &rng, 3.0), o(DType::kF32, {n_new, h, rank}), orf(DType::kF32, {n_new, h, rank});
        const std::vector<int32_t> starts{0, int32_t(n_new)}, pasts{past};
        ops::mla_attention(r.ex, q.t, pl, starts, pasts, 0.2f, o.t);
        ref::mla_attention(q.t, pl, starts, pasts, 0.2f, orf.t);
        EXPECT_LT(rel_err(o.t, orf.t), 1e-5) << (bf16 ? "bf16" : "f32");
        for (int64_t t = 0; t < n_new; ++t) {
            Buf one(DType::kF32, {1, h, rank});
            const std::vector<int32_t> s1{0, 1}, p1{int32_t(past + t)};
            ops::mla_attention(r.ex, q.t.rows(t, t + 1), pl, s1, p1, 0.2f, one.t);
            ASSERT_EQ(0, std::memcmp(one.f(), o.f() + t * h * rank, size_t(h * rank) * 4)) << "token " << t;
        }
    }
}

TEST_P(Ops, MoeRoute) {
    Rng rng(7);
    for (auto [e, k, groups, keep, renorm] :
         {std::tuple{8, 2, 1, 1, true}, {8, 8, 1, 1, true}, {12, 3, 4, 2, false}, {16, 4, 2, 1, true}}) {
        const int64_t t = 6;
        Buf logits(DType::kF32, {t, e}, &rng, 2.0), bias(DType::kF32, {e}, &rng, 0.3);
        Buf ids(DType::kI32, {t, k}), w(DType::kF32, {t, k}), idr(DType::kI32, {t, k}), wr(DType::kF32, {t, k});
        ops::RouteParams p{k, groups, keep, renorm, 2.446f};
        ops::moe_route(r.ex, logits.t, bias.t, p, ids.t, w.t);
        ref::moe_route(logits.t, bias.t, p, idr.t, wr.t);
        EXPECT_EQ(0, std::memcmp(ids.t.data, idr.t.data, ids.t.nbytes())) << "E=" << e << " k=" << k;
        EXPECT_LT(rel_err(w.t, wr.t), 1e-6);
    }
}

TEST(OpsFixed, MoeRouteBiasChoosesWeightsDoNot) {
    test::Runner r(1);
    // scores: sigmoid(logit); bias promotes expert 2 over expert 0 for the choice only
    float lg[4] = {2.0f, 1.0f, 0.0f, -1.0f}, bias[4] = {0.0f, 0.0f, 0.9f, 0.0f};
    int32_t ids[2];
    float w[2];
    Tensor tl(lg, DType::kF32, {1, 4}), tb(bias, DType::kF32, {4}), ti(ids, DType::kI32, {1, 2}), tw(w, DType::kF32, {1, 2});
    ops::moe_route(r.ex, tl, tb, ops::RouteParams{2, 1, 1, true, 2.0f}, ti, tw);
    const double s2 = 1 / (1 + std::exp(-0.0)), s0 = 1 / (1 + std::exp(-2.0));   // sel: 2 → 1.4, 0 → 0.88
    EXPECT_EQ(ids[0], 2);
    EXPECT_EQ(ids[1], 0);
    EXPECT_NEAR(w[0], 2.0 * s2 / (s2 + s0), 1e-6);
    EXPECT_NEAR(w[1], 2.0 * s0 / (s2 + s0), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Threads, Ops, ::testing::Values(1, 2));

}  // namespace
}  // namespace kimi
