// Op tests (see op_test.cpp for how to add an op): the KDA ops — the short convolution, the
// forget gates and the gated delta rule — against their scalar references, on varlen batches
// with state slots and prefix-cache captures, with 1 and 2 threads; and the KDA kernel's ISA
// builds against each other, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kda_kernel.h"
#include "op_test_util.h"

namespace kimi {
namespace {

using test::Buf;
using test::rel_err;
using test::same_bits;

class KdaOps : public ::testing::TestWithParam<int> {
protected:
    test::Runner r{GetParam()};
};

// Sequences of a step: token spans, their state slots, and captures into other slots.
struct Layout {
    std::vector<int32_t> starts, slots;
    std::vector<ops::StateCapture> captures;
    int64_t n_slots;
    ops::SeqLayout seqs() const { return {starts, slots, captures}; }
    int64_t tokens() const { return starts.back(); }
};

const std::vector<Layout>& layouts() {
    static const std::vector<Layout> all = {
        {{0, 1}, {1}, {}, 2},                                        // one decode token
        {{0, 6, 9}, {2, 0}, {}, 3},                                  // two prefills
        {{0, 6, 9}, {2, 0}, {{0, 2, 1}, {0, 5, 3}, {1, 1, 4}}, 5},   // with captures
        {{0, 1, 5, 12}, {3, 0, 2}, {{2, 6, 1}}, 4},                  // a decode token among prefills
    };
    return all;
}

std::string describe(const Layout& l) {
    return "T=" + std::to_string(l.tokens()) + " seqs=" + std::to_string(l.slots.size()) +
        " captures=" + std::to_string(l.captures.size());
}

TEST_P(KdaOps, CausalConv1dSilu) {
    Rng rng(5);
    for (const Layout& l : layouts())
        for (auto [c, w] : {std::pair<int64_t, int64_t>{15, 4}, {70, 4}, {9, 2}, {5, 1}}) {
            const int64_t t = l.tokens(), stride = (w - 1) * c;
            Buf x(DType::kF32, {t, c}, &rng), cw(DType::kF32, {c, 1, w}, &rng, 0.5), y(DType::kF32, {t, c}),
                yr(DType::kF32, {t, c});
            Buf st(DType::kF32, {l.n_slots, w - 1, c}, &rng), str(st);
            ops::causal_conv1d_silu(r.ex, x.t, cw.t, {st.f(), stride}, l.seqs(), y.t);
            ref::causal_conv1d_silu(r.ex, x.t, cw.t, {str.f(), stride}, l.seqs(), yr.t);
            EXPECT_LT(rel_err(y.t, yr.t), 1e-6) << describe(l) << " C=" << c << " W=" << w;
            EXPECT_TRUE(same_bits(st.t, str.t))
                << "windows and captures are copies: " << describe(l) << " C=" << c << " W=" << w;
        }
}

TEST_P(KdaOps, KdaGate) {
    Rng rng(4);
    for (auto [t, h, k] : {std::tuple{1, 1, 1}, {5, 3, 6}, {2, 4, 65}}) {
        Buf f(DType::kF32, {t, h * k}, &rng, 8.0), a(DType::kF32, {h}), bias(DType::kF32, {h * k}, &rng);
        for (int i = 0; i < h; ++i) a.f()[i] = -float(i + 1);
        Buf g(DType::kF32, {t, h * k}), gr(DType::kF32, {t, h * k});
        ops::kda_gate(r.ex, f.t, a.t, bias.t, g.t);
        ref::kda_gate(r.ex, f.t, a.t, bias.t, gr.t);
        EXPECT_LT(rel_err(g.t, gr.t), 1e-6) << "T=" << t << " H=" << h << " K=" << k;
        ops::kda_gate(r.ex, f.t, a.t, bias.t, f.t);   // in place (f aliases g)
        EXPECT_TRUE(same_bits(f.t, g.t));
    }
}

// The Kimi-K3 lower-bound forget gate: the reference, its range, in place as the layer calls it.
TEST_P(KdaOps, KdaGateLowerBound) {
    Rng rng(6);
    for (auto [t, h, k] : {std::tuple{1, 1, 1}, {7, 5, 6}, {2, 3, 65}})
        for (float lb : {-5.0f, -0.5f}) {
            Buf f(DType::kF32, {t, h * k}, &rng, 6.0), a(DType::kF32, {h}), bias(DType::kF32, {h * k}, &rng);
            for (int i = 0; i < h; ++i) a.f()[i] = -std::exp(float(i % 5) - 2.0f);   // −exp(A_log), A_log in [−2, 2]
            Buf g(DType::kF32, {t, h * k}), gr(DType::kF32, {t, h * k});
            ops::kda_gate_lower_bound(r.ex, f.t, a.t, bias.t, lb, g.t);
            ref::kda_gate_lower_bound(r.ex, f.t, a.t, bias.t, lb, gr.t);
            EXPECT_LT(rel_err(g.t, gr.t), 1e-6) << "lower bound " << lb << " T=" << t << " H=" << h << " K=" << k;
            for (int64_t i = 0; i < g.t.numel(); ++i) {
                EXPECT_GE(g.f()[i], lb);
                EXPECT_LE(g.f()[i], 0.0f);
            }
            ops::kda_gate_lower_bound(r.ex, f.t, a.t, bias.t, lb, f.t);
            EXPECT_TRUE(same_bits(f.t, g.t));
        }
}

// The recurrence continues from the stored states; outputs, final states and captured states
// against the reference (which keeps its state in double).
TEST_P(KdaOps, KdaRecurrent) {
    Rng rng(15);
    for (const Layout& l : layouts())
        for (auto [h, k, v] : {std::tuple<int64_t, int64_t, int64_t>{3, 5, 7}, {2, 16, 33}, {1, 128, 128}}) {
            const int64_t t = l.tokens(), stride = h * k * v;
            Buf q(DType::kF32, {t, h, k}, &rng, 0.3), kk(DType::kF32, {t, h, k}, &rng, 0.3),
                vv(DType::kF32, {t, h, v}, &rng);
            Buf g(DType::kF32, {t, h, k}, &rng, 0.2), beta(DType::kF32, {t, h});
            for (int64_t i = 0; i < g.t.numel(); ++i) g.f()[i] = -std::fabs(g.f()[i]);
            for (int64_t i = 0; i < beta.t.numel(); ++i) beta.f()[i] = float(rng.uniform());
            Buf s(DType::kF32, {l.n_slots, h, k, v}, &rng, 0.1), sr(s);
            Buf o(DType::kF32, {t, h, v}), orf(DType::kF32, {t, h, v});
            ops::kda_recurrent(r.ex, q.t, kk.t, vv.t, g.t, beta.t, {s.f(), stride}, l.seqs(), o.t);
            ref::kda_recurrent(r.ex, q.t, kk.t, vv.t, g.t, beta.t, {sr.f(), stride}, l.seqs(), orf.t);
            EXPECT_LT(rel_err(o.t, orf.t), 1e-5) << describe(l) << " H=" << h << " K=" << k << " V=" << v;
            EXPECT_LT(rel_err(s.t, sr.t), 1e-5) << describe(l) << " H=" << h << " K=" << k << " V=" << v;
        }
}

// Prefix-cache captures: the conv window and the KDA state of a sequence after its first t
// tokens of a step, copied into another slot mid-step, are bit for bit what running only
// those t tokens leaves; outputs and the running slots' final states are unchanged.
TEST_P(KdaOps, StateCapturesMidSequence) {
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
        Run out{Buf(st0), Buf(s0), Buf(DType::kF32, {t, c}), Buf(DType::kF32, {t, h, v})};
        ops::causal_conv1d_silu(r.ex, x.t, cw.t, {out.st.f(), conv_stride}, seqs, out.y.t);
        ops::kda_recurrent(r.ex, q.t, kk.t, vv.t, g.t, beta.t, {out.s.f(), kda_stride}, seqs, out.o.t);
        return out;
    };
    Run a = run(plain), b = run(captured);
    EXPECT_TRUE(same_bits(a.y.t, b.y.t));
    EXPECT_TRUE(same_bits(a.o.t, b.o.t));
    for (int32_t slot : slots) {
        EXPECT_EQ(0,
                  std::memcmp(a.st.f() + slot * conv_stride, b.st.f() + slot * conv_stride, size_t(conv_stride) * 4));
        EXPECT_EQ(0, std::memcmp(a.s.f() + slot * kda_stride, b.s.f() + slot * kda_stride, size_t(kda_stride) * 4));
    }
    for (const ops::StateCapture& cap : caps) {   // the first cap.t tokens of that sequence alone
        const int32_t from = starts[size_t(cap.seq)];
        const std::vector<int32_t> one_start{0, cap.t}, one_slot{slots[size_t(cap.seq)]};
        const ops::SeqLayout one{one_start, one_slot};
        Buf st(st0), s(s0), y(DType::kF32, {cap.t, c}), o(DType::kF32, {cap.t, h, v});
        ops::causal_conv1d_silu(r.ex, x.t.rows(from, from + cap.t), cw.t, {st.f(), conv_stride}, one, y.t);
        ops::kda_recurrent(r.ex, q.t.rows(from, from + cap.t), kk.t.rows(from, from + cap.t),
                           vv.t.rows(from, from + cap.t), g.t.rows(from, from + cap.t), beta.t.rows(from, from + cap.t),
                           {s.f(), kda_stride}, one, o.t);
        EXPECT_EQ(
            0,
            std::memcmp(st.f() + one_slot[0] * conv_stride, b.st.f() + cap.slot * conv_stride, size_t(conv_stride) * 4))
            << "conv capture seq " << cap.seq << " t " << cap.t;
        EXPECT_EQ(
            0, std::memcmp(s.f() + one_slot[0] * kda_stride, b.s.f() + cap.slot * kda_stride, size_t(kda_stride) * 4))
            << "state capture seq " << cap.seq << " t " << cap.t;
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, KdaOps, ::testing::Values(1, 2));

// The KDA recurrence compiled portably and with AVX-512 (auto-vectorized): the same bits,
// so a machine's choice of kernel never changes the KDA state or output.
TEST(KdaKernels, PortableAndAvx512AgreeBitForBit) {
    if (!cpu::use_avx512()) GTEST_SKIP() << "AVX-512 kernels off (the CPU lacks AVX-512, or KIMI_ISA lowers it)";
    Rng rng(21);
    for (auto [dk, dv] : {std::pair<int64_t, int64_t>{128, 128}, {24, 37}}) {
        const int64_t t = 5;
        Buf q(DType::kF32, {t, dk}, &rng, 0.3), k(DType::kF32, {t, dk}, &rng, 0.3), v(DType::kF32, {t, dv}, &rng);
        Buf g(DType::kF32, {t, dk}, &rng, 0.2), beta(DType::kF32, {t}, &rng), s0(DType::kF32, {dk, dv}, &rng);
        for (int64_t i = 0; i < g.t.numel(); ++i) g.f()[i] = -std::fabs(g.f()[i]);
        Buf sa(s0), sb(s0), oa(DType::kF32, {t, dv}), ob(DType::kF32, {t, dv});
        cpu::KdaHeadArgs a{q.f(), k.f(), v.f(), g.f(), beta.f(), oa.f(), dk, dv, 1, 0, t, dk, dv, sa.f()};
        alignas(64) float u[512];
        cpu::kda_head_portable(a, u);
        a.o = ob.f();
        a.state = sb.f();
        cpu::kda_head_avx512(a, u);
        EXPECT_TRUE(same_bits(oa.t, ob.t)) << dk << "x" << dv;
        EXPECT_TRUE(same_bits(sa.t, sb.t)) << dk << "x" << dv;
    }
}

}   // namespace
}   // namespace kimi
