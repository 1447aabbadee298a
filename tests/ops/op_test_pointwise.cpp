// Op tests (see op_test.cpp for how to add an op): the normalizations, the element-wise ops,
// the Block AttnRes mix and MoE routing — each kernel against its scalar reference, on odd
// shapes (element counts past one 4096-element task included), with 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace kimi {
namespace {

using test::Buf;
using test::kFloatDtypes;
using test::rel_err;
using test::same_bits;

class PointwiseOps : public ::testing::TestWithParam<int> {
protected:
    test::Runner r{GetParam()};
};

// ---- normalizations

TEST_P(PointwiseOps, RmsNorm) {
    Rng rng(3);
    for (DType wt : kFloatDtypes)
        for (auto [t, d] : {std::pair{1, 1}, {3, 7}, {4, 64}, {2, 129}, {5, 33}}) {
            Buf x(DType::kF32, {t, d}, &rng, 3.0), w(wt, {d}, &rng), y(DType::kF32, {t, d}), yr(DType::kF32, {t, d});
            ops::rms_norm(r.ex, x.t, w.t, 1e-5f, y.t);
            ref::rms_norm(r.ex, x.t, w.t, 1e-5f, yr.t);
            EXPECT_LT(rel_err(y.t, yr.t), 1e-6) << "T=" << t << " D=" << d << " w=" << dtype_name(wt);
            ops::rms_norm(r.ex, x.t, w.t, 1e-5f, x.t);   // in place: the same bits
            EXPECT_TRUE(same_bits(x.t, y.t));
        }
}

TEST_P(PointwiseOps, L2NormHeads) {
    Rng rng(8);
    for (auto [t, h, k] : {std::tuple{1, 1, 1}, {3, 3, 7}, {4, 2, 64}, {2, 5, 129}}) {
        Buf x(DType::kF32, {t, h, k}, &rng, 2.0), xr(x);
        ops::l2_norm_heads(r.ex, x.t, 1e-6f, 0.25f);
        ref::l2_norm_heads(r.ex, xr.t, 1e-6f, 0.25f);
        EXPECT_LT(rel_err(x.t, xr.t), 1e-6) << "T=" << t << " H=" << h << " K=" << k;
    }
}

TEST_P(PointwiseOps, GatedRmsNorm) {
    Rng rng(9);
    for (DType wt : kFloatDtypes)
        for (auto [t, h, v] : {std::tuple{1, 1, 1}, {3, 3, 7}, {4, 2, 64}, {2, 5, 129}}) {
            Buf x(DType::kF32, {t, h, v}, &rng), z(DType::kF32, {t, h, v}, &rng, 3.0), w(wt, {v}, &rng);
            Buf y(DType::kF32, {t, h, v}), yr(DType::kF32, {t, h, v});
            ops::gated_rms_norm(r.ex, x.t, w.t, z.t, 1e-5f, y.t);
            ref::gated_rms_norm(r.ex, x.t, w.t, z.t, 1e-5f, yr.t);
            EXPECT_LT(rel_err(y.t, yr.t), 1e-6) << "T=" << t << " H=" << h << " V=" << v << " w=" << dtype_name(wt);
        }
}

// ---- element-wise

// f32 addition is exact after rounding, so the kernel and the reference agree bit for bit.
TEST_P(PointwiseOps, AddInplace) {
    Rng rng(10);
    for (auto [t, d] : {std::pair{1, 1}, {3, 7}, {2, 4099}, {3, 4096}}) {
        Buf acc(DType::kF32, {t, d}, &rng), a(DType::kF32, {t, d}, &rng, 10.0), accr(acc);
        ops::add_inplace(r.ex, acc.t, a.t);
        ref::add_inplace(r.ex, accr.t, a.t);
        EXPECT_TRUE(same_bits(acc.t, accr.t)) << "T=" << t << " D=" << d;
        EXPECT_LT(rel_err(acc.t, accr.t), 1e-7);
    }
}

// Rows gathered as they are (widened exactly), repeated ids and both ends of the table included.
TEST_P(PointwiseOps, Embedding) {
    Rng rng(11);
    for (DType dt : kFloatDtypes)
        for (auto [v, d] : {std::pair{1, 1}, {7, 3}, {50, 129}}) {
            Buf table(dt, {v, d}, &rng);
            std::vector<int32_t> ids{0, int32_t(v - 1)};
            for (int i = 0; i < 9; ++i) ids.push_back(int32_t(rng.below(uint64_t(v))));
            ids.push_back(ids[2]);
            const int64_t t = int64_t(ids.size());
            Buf y(DType::kF32, {t, d}), yr(DType::kF32, {t, d});
            ops::embedding(r.ex, table.t, ids, y.t);
            ref::embedding(r.ex, table.t, ids, yr.t);
            EXPECT_TRUE(same_bits(y.t, yr.t)) << "V=" << v << " D=" << d << " " << dtype_name(dt);
            EXPECT_LT(rel_err(y.t, yr.t), 1e-7);
        }
}

TEST_P(PointwiseOps, SigmoidInplace) {
    Rng rng(4);
    for (int64_t n : {1, 9, 4097, 10001})
        for (double scale : {5.0, 40.0}) {   // 40: both saturations
            Buf x(DType::kF32, {n}, &rng, scale), xr(x);
            ops::sigmoid_inplace(r.ex, x.t);
            ref::sigmoid_inplace(r.ex, xr.t);
            EXPECT_LT(rel_err(x.t, xr.t), 1e-6) << "n=" << n << " scale=" << scale;
        }
}

TEST_P(PointwiseOps, MulSigmoidInplace) {
    Rng rng(5);
    for (auto [t, d] : {std::pair{1, 1}, {7, 13}, {2, 4099}}) {
        Buf x(DType::kF32, {t, d}, &rng), z(DType::kF32, {t, d}, &rng, 4.0), xr(x);
        ops::mul_sigmoid_inplace(r.ex, x.t, z.t);
        ref::mul_sigmoid_inplace(r.ex, xr.t, z.t);
        EXPECT_LT(rel_err(x.t, xr.t), 1e-6) << "T=" << t << " D=" << d;
    }
}

TEST_P(PointwiseOps, SiluMul) {
    Rng rng(6);
    for (auto [t, f] : {std::pair{1, 1}, {5, 9}, {3, 4099}}) {
        Buf g(DType::kF32, {t, f}, &rng, 3.0), u(DType::kF32, {t, f}, &rng), y(DType::kF32, {t, f}),
            yr(DType::kF32, {t, f});
        ops::silu_mul(r.ex, g.t, u.t, y.t);
        ref::silu_mul(r.ex, g.t, u.t, yr.t);
        EXPECT_LT(rel_err(y.t, yr.t), 1e-6) << "T=" << t << " F=" << f;
        ops::silu_mul(r.ex, g.t, u.t, g.t);   // y aliasing gate, as the FFN calls it
        EXPECT_TRUE(same_bits(g.t, y.t));
    }
}

// SiTU·mul (Kimi-K3) with and without the linear β; large inputs reach tanh's saturation.
TEST_P(PointwiseOps, SituMul) {
    Rng rng(7);
    for (int64_t n : {1, 9, 4099})
        for (auto [beta, lin] : {std::pair{4.0f, 25.0f}, {4.0f, 0.0f}, {1.0f, 2.5f}}) {
            Buf u(DType::kF32, {n}, &rng, 12.0), v(DType::kF32, {n}, &rng, 40.0), s(DType::kF32, {n}),
                sr(DType::kF32, {n});
            ops::situ_mul(r.ex, u.t, v.t, beta, lin, s.t);
            ref::situ_mul(r.ex, u.t, v.t, beta, lin, sr.t);
            EXPECT_LT(rel_err(s.t, sr.t), 2e-6) << "n=" << n << " beta=" << beta << " linear_beta=" << lin;
            // bounds: |gate part| < β and |up part| ≤ β_lin (when set)
            for (int64_t i = 0; i < n && lin > 0; ++i) EXPECT_LE(std::fabs(s.f()[i]), beta * lin * 1.0001f);
            ops::situ_mul(r.ex, u.t, v.t, beta, lin, u.t);   // y aliasing gate
            EXPECT_TRUE(same_bits(u.t, s.t));
        }
}

// ---- residual mixing and routing

// Block AttnRes mix for 0..4 banked blocks, odd widths; a token's result does not depend on
// the other tokens; with every entry equal the mix returns it (the weights sum to 1).
TEST_P(PointwiseOps, AttnResMix) {
    Rng rng(7);
    for (auto [t, d] : {std::pair{1, 1}, {3, 7}, {5, 64}, {2, 131}})
        for (size_t nb : {0, 1, 2, 4}) {
            std::vector<Buf> blocks;
            for (size_t i = 0; i < nb; ++i)
                blocks.emplace_back(DType::kF32, std::initializer_list<int64_t>{t, d}, &rng, double(i + 1));
            std::vector<const Tensor*> bp;
            for (auto& b : blocks) bp.push_back(&b.t);
            Buf p(DType::kF32, {t, d}, &rng, 3.0), w(DType::kF32, {d}, &rng, 0.3), y(DType::kF32, {t, d}),
                yr(DType::kF32, {t, d});
            ops::attn_res_mix(r.ex, bp, p.t, w.t, 1e-5f, y.t);
            ref::attn_res_mix(r.ex, bp, p.t, w.t, 1e-5f, yr.t);
            EXPECT_LT(rel_err(y.t, yr.t), 2e-6) << "T=" << t << " D=" << d << " blocks=" << nb;
            for (int64_t row = 0; row < t; ++row) {   // one token alone
                std::vector<Tensor> rows;
                for (auto& b : blocks) rows.push_back(b.t.rows(row, row + 1));
                std::vector<const Tensor*> rp;
                for (auto& x : rows) rp.push_back(&x);
                Buf y1(DType::kF32, {1, d});
                ops::attn_res_mix(r.ex, rp, p.t.rows(row, row + 1), w.t, 1e-5f, y1.t);
                EXPECT_TRUE(same_bits(y1.t, y.t.rows(row, row + 1))) << "row " << row;
            }
        }
    Buf p(DType::kF32, {2, 9}, &rng), w(DType::kF32, {9}, &rng), y(DType::kF32, {2, 9});
    const Tensor* same[] = {&p.t, &p.t};
    ops::attn_res_mix(r.ex, same, p.t, w.t, 1e-5f, y.t);
    for (int64_t i = 0; i < 18; ++i) EXPECT_NEAR(y.f()[i], p.f()[i], 1e-6 * (1 + std::fabs(p.f()[i])));
}

TEST_P(PointwiseOps, MoeRoute) {
    Rng rng(7);
    for (auto [e, k, groups, keep, renorm] : {std::tuple{8, 2, 1, 1, true},
                                              {8, 8, 1, 1, true},
                                              {12, 3, 4, 2, false},
                                              {16, 4, 2, 1, true},
                                              {9, 1, 3, 3, true},
                                              {7, 3, 1, 1, false}})
        for (int64_t t : {1, 6}) {
            Buf logits(DType::kF32, {t, e}, &rng, 2.0), bias(DType::kF32, {e}, &rng, 0.3);
            Buf ids(DType::kI32, {t, k}), w(DType::kF32, {t, k}), idr(DType::kI32, {t, k}), wr(DType::kF32, {t, k});
            const ops::RouteParams p{k, groups, keep, renorm, 2.446f};
            ops::moe_route(r.ex, logits.t, bias.t, p, ids.t, w.t);
            ref::moe_route(r.ex, logits.t, bias.t, p, idr.t, wr.t);
            EXPECT_TRUE(same_bits(ids.t, idr.t)) << "E=" << e << " k=" << k << " groups=" << groups << " T=" << t;
            EXPECT_LT(rel_err(w.t, wr.t), 1e-6) << "E=" << e << " k=" << k << " groups=" << groups << " T=" << t;
        }
}

// The counting sort against a plain stable sort by expert: the same rows for every pair, the
// same gathered activations bit for bit, -1 (and no row) for another rank's experts.
TEST_P(PointwiseOps, MoeDispatch) {
    Rng rng(11);
    for (auto [t, e, k, in] : {std::tuple{1, 8, 2, 5}, {7, 8, 3, 16}, {13, 5, 5, 3}, {4, 16, 1, 33}})
        for (int remote : {0, 1}) {   // every other expert on another rank
            Buf x(DType::kF32, {t, in}, &rng), ids(DType::kI32, {t, k});
            for (int64_t i = 0; i < int64_t(t) * k; ++i) ids.t.i32()[i] = int32_t(rng.next() % uint64_t(e));
            std::vector<uint8_t> local(size_t(e), 1);
            if (remote)
                for (int64_t j = 1; j < e; j += 2) local[size_t(j)] = 0;
            Buf st(DType::kI32, {e + 1}), row(DType::kI32, {t, k}), xg(DType::kF32, {int64_t(t) * k, in});
            Buf str(DType::kI32, {e + 1}), rowr(DType::kI32, {t, k}), xgr(DType::kF32, {int64_t(t) * k, in});
            ops::moe_dispatch(r.ex, x.t, ids.t, local, st.t, row.t, xg.t);
            ref::moe_dispatch(r.ex, x.t, ids.t, local, str.t, rowr.t, xgr.t);
            const std::string at =
                "T=" + std::to_string(t) + " E=" + std::to_string(e) + " remote=" + std::to_string(remote);
            EXPECT_TRUE(same_bits(st.t, str.t)) << at;
            EXPECT_TRUE(same_bits(row.t, rowr.t)) << at;
            const int64_t m = st.t.i32()[e];
            EXPECT_TRUE(same_bits(xg.t.rows(0, m), xgr.t.rows(0, m))) << at;
            if (!remote) {
                EXPECT_EQ(m, int64_t(t) * k) << at;
            }
        }
}

// Each token's weighted sum of its experts' rows against a double sum, and a token's result
// independent of the other tokens (one row at a time gives the same bits).
TEST_P(PointwiseOps, MoeCombine) {
    Rng rng(12);
    for (auto [t, k, m, in] : {std::tuple{1, 2, 3, 5}, {6, 3, 18, 16}, {9, 4, 20, 37}}) {
        Buf yg(DType::kF32, {m, in}, &rng), w(DType::kF32, {t, k}, &rng), row(DType::kI32, {t, k});
        for (int64_t i = 0; i < int64_t(t) * k; ++i)
            row.t.i32()[i] = i % 5 == 4 ? -1 : int32_t(rng.next() % uint64_t(m));   // some remote
        Buf y(DType::kF32, {t, in}), yr(DType::kF32, {t, in});
        ops::moe_combine(r.ex, yg.t, row.t, w.t, y.t);
        ref::moe_combine(r.ex, yg.t, row.t, w.t, yr.t);
        EXPECT_LT(rel_err(y.t, yr.t), 1e-6) << "T=" << t << " k=" << k;
        for (int64_t i = 0; i < t; ++i) {
            Buf y1(DType::kF32, {1, in});
            ops::moe_combine(r.ex, yg.t, row.t.rows(i, i + 1), w.t.rows(i, i + 1), y1.t);
            EXPECT_TRUE(same_bits(y1.t, y.t.rows(i, i + 1))) << "row " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, PointwiseOps, ::testing::Values(1, 2));

TEST(MoeRouteFixed, BiasChoosesWeightsDoNot) {
    test::Runner r(1);
    // scores: sigmoid(logit); bias promotes expert 2 over expert 0 for the choice only
    float lg[4] = {2.0f, 1.0f, 0.0f, -1.0f}, bias[4] = {0.0f, 0.0f, 0.9f, 0.0f};
    int32_t ids[2];
    float w[2];
    Tensor tl(lg, DType::kF32, {1, 4}), tb(bias, DType::kF32, {4}), ti(ids, DType::kI32, {1, 2}),
        tw(w, DType::kF32, {1, 2});
    ops::moe_route(r.ex, tl, tb, ops::RouteParams{2, 1, 1, true, 2.0f}, ti, tw);
    const double s2 = 1 / (1 + std::exp(-0.0)), s0 = 1 / (1 + std::exp(-2.0));   // sel: 2 → 1.4, 0 → 0.88
    EXPECT_EQ(ids[0], 2);
    EXPECT_EQ(ids[1], 0);
    EXPECT_NEAR(w[0], 2.0 * s2 / (s2 + s0), 1e-6);
    EXPECT_NEAR(w[1], 2.0 * s0 / (s2 + s0), 1e-6);
}

}   // namespace
}   // namespace kimi
