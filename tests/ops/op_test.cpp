// Op tests: every op's CPU kernel (through kimi::ops, so its contract check runs too) against
// its scalar reference (backend/ref) on odd shapes, with 1 and 2 threads, for every dtype and
// precision the op takes; plus the properties the model relies on (a row's result does not
// depend on the other rows, the batch size or the thread count). The suite runs again under
// KIMI_ISA=avx2 and KIMI_ISA=scalar (CMakeLists.txt), so an AVX-512 machine checks every kernel.
//
// Files, by concept: op_test.cpp (this one: the table's coverage, the comparisons, matrix
// products), op_test_pointwise.cpp (norms, element-wise ops, AttnRes mix, MoE routing),
// op_test_kda.cpp (KDA), op_test_mla.cpp (MLA), mxfp4_test.cpp (MXFP4 weights), with the
// helpers in op_test_util.h. A file past ~800 lines is split along its concepts.
//
// How to add an op: docs/development.md#add-an-op (the one checklist).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"
#include "op_test_util.h"

namespace kimi {
namespace {

using test::Buf;
using test::kMatmulWeightDtypes;
using test::kPrecisions;
using test::precision_name;
using test::rel_err;

// matmul_grouped → MatmulGrouped: the name of an op's test.
std::string test_name_of(const std::string& op) {
    std::string name;
    bool upper = true;
    for (char c : op) {
        if (c == '_') {
            upper = true;
            continue;
        }
        name += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
        upper = false;
    }
    return name;
}

// Every op of the table has a test named after it (in any suite; parameterized or not).
TEST(OpTable, EveryOpHasATest) {
#define KIMI_OP_NAME(name, params) #name,
    const std::vector<std::string> table = {KIMI_OPS(KIMI_OP_NAME)};
#undef KIMI_OP_NAME
    std::set<std::string> tests;
    const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
        const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
        for (int j = 0; j < suite.total_test_count(); ++j) {
            const std::string name = suite.GetTestInfo(j)->name();   // "MatmulGrouped/1" for a TEST_P
            tests.insert(name.substr(0, name.find('/')));
        }
    }
    EXPECT_EQ(test_name_of("causal_conv1d_silu"), "CausalConv1dSilu");
    EXPECT_GE(table.size(), 20u);
    for (const std::string& op : table)
        EXPECT_TRUE(tests.count(test_name_of(op))) << "op " << op << " has no test " << test_name_of(op);
}

// The comparisons fail on a wrong element, a NaN, and an element the kernel never wrote.
TEST(OpTable, ComparisonsCanFail) {
    test::Runner r(1);
    Rng rng(40);
    Buf x(DType::kF32, {3, 37}, &rng), w(DType::kBF16, {11, 37}, &rng), y(DType::kF32, {3, 11}),
        yr(DType::kF32, {3, 11});
    ops::matmul(r.ex, x.t, w.t, Precision::kF32, y.t);
    ref::matmul(r.ex, x.t, w.t, Precision::kF32, yr.t);
    ASSERT_LT(rel_err(y.t, yr.t), 2e-6);
    double scale = 0;
    for (int64_t i = 0; i < yr.t.numel(); ++i) scale = std::max(scale, double(std::fabs(yr.f()[i])));
    Buf off(y);
    off.f()[17] += float(1e-5 * scale);   // one element five tolerances off
    EXPECT_GT(rel_err(off.t, yr.t), 2e-6);
    EXPECT_FALSE(test::same_bits(off.t, y.t));
    off.f()[17] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(rel_err(off.t, yr.t), std::numeric_limits<double>::infinity());
    const Buf unwritten(DType::kF32, {3, 11});
    EXPECT_EQ(rel_err(unwritten.t, yr.t), std::numeric_limits<double>::infinity());
    EXPECT_EQ(rel_err(y.t, y.t.rows(0, 2)), std::numeric_limits<double>::infinity());   // element counts differ
}

class MatmulOps : public ::testing::TestWithParam<int> {
protected:
    test::Runner r{GetParam()};
};

// MXFP4 weights need I to be a multiple of 32.
int64_t in_for(DType wt, int64_t in) {
    return wt == DType::kMXFP4 ? (in + kMxfp4Group - 1) / kMxfp4Group * kMxfp4Group : in;
}

std::string what(DType wt, Precision p, int64_t t, int64_t in, int64_t out) {
    return "T=" + std::to_string(t) + " I=" + std::to_string(in) + " O=" + std::to_string(out) +
        " w=" + dtype_name(wt) + " " + precision_name(p);
}

TEST_P(MatmulOps, Matmul) {
    Rng rng(1);
    for (DType wt : kMatmulWeightDtypes)
        for (auto [t, in0, out] : {std::tuple{1, 1, 1},
                                   {1, 7, 3},
                                   {3, 8, 5},
                                   {5, 33, 17},
                                   {2, 64, 64},
                                   {7, 130, 37},
                                   {16, 256, 19},
                                   {25, 97, 29}})
            for (Precision p : kPrecisions) {
                const int64_t in = in_for(wt, in0);
                Buf x(DType::kF32, {t, in}, &rng), w(wt, {out, in}, &rng, 0.1), y(DType::kF32, {t, out}),
                    yr(DType::kF32, {t, out});
                ops::matmul(r.ex, x.t, w.t, p, y.t);
                ref::matmul(r.ex, x.t, w.t, p, yr.t);
                EXPECT_LT(rel_err(y.t, yr.t), 2e-6) << what(wt, p, t, in, out);
            }
}

// Rows every ldx / ldy floats: the product of the rows, the floats between rows untouched.
TEST_P(MatmulOps, MatmulStrided) {
    Rng rng(13);
    for (DType wt : kMatmulWeightDtypes)
        for (auto [t, in0, out, pad_x, pad_y] :
             {std::tuple{1, 7, 3, 0, 0}, {3, 33, 5, 5, 3}, {6, 64, 19, 1, 7}, {17, 130, 29, 31, 2}})
            for (Precision p : kPrecisions) {
                const int64_t in = in_for(wt, in0), ldx = in + pad_x, ldy = out + pad_y;
                Buf x(DType::kF32, {t, ldx}, &rng), w(wt, {out, in}, &rng, 0.1), y(DType::kF32, {t, ldy});
                for (int64_t row = 0; row < t; ++row)
                    for (int64_t j = out; j < ldy; ++j) y.f()[row * ldy + j] = float(1000 * row + j);
                Buf yr(y);
                ops::matmul_strided(r.ex, x.f(), t, ldx, w.t, p, y.f(), ldy);
                ref::matmul_strided(r.ex, x.f(), t, ldx, w.t, p, yr.f(), ldy);
                for (int64_t row = 0; row < t; ++row) {
                    EXPECT_LT(rel_err(y.f() + row * ldy, yr.f() + row * ldy, out), 2e-6)
                        << what(wt, p, t, in, out) << " row " << row;
                    for (int64_t j = out; j < ldy; ++j)
                        ASSERT_EQ(y.f()[row * ldy + j], float(1000 * row + j)) << "gap written";
                }
            }
}

// Expert groups of every weight dtype and of mixed ones, empty groups with no weight at all:
// the reference, and bit for bit each group's own matmul.
TEST_P(MatmulOps, MatmulGrouped) {
    Rng rng(14);
    const int64_t out = 37, rows = 13;
    for (int mode = 0; mode <= 4; ++mode)   // 0-3: every expert of kMatmulWeightDtypes[mode]; 4: mixed
        for (const std::vector<int32_t>& starts :
             {std::vector<int32_t>{0, 1, 4, 4, 11, 13}, {0, 0, 13, 13, 13, 13}, {0, 2, 3, 5, 8, 13}})
            for (Precision p : kPrecisions) {
                const bool float_only = mode < 4 && kMatmulWeightDtypes[mode] != DType::kMXFP4;
                const int64_t in = float_only ? 45 : 96, n_groups = int64_t(starts.size()) - 1;
                std::vector<Buf> experts;
                for (int64_t g = 0; g < n_groups; ++g)
                    experts.emplace_back(kMatmulWeightDtypes[mode < 4 ? mode : g % 4],
                                         std::initializer_list<int64_t>{out, in}, &rng, 0.1);
                std::vector<const Tensor*> ws;
                for (int64_t g = 0; g < n_groups; ++g)
                    ws.push_back(starts[size_t(g)] == starts[size_t(g) + 1] ? nullptr : &experts[size_t(g)].t);
                Buf x(DType::kF32, {rows, in}, &rng), y(DType::kF32, {rows, out}), yr(DType::kF32, {rows, out});
                ops::matmul_grouped(r.ex, x.t, ws, starts, p, y.t);
                ref::matmul_grouped(r.ex, x.t, ws, starts, p, yr.t);
                const std::string at = "mode " + std::to_string(mode) + " " + precision_name(p) +
                    " starts[1]=" + std::to_string(starts[1]);
                EXPECT_LT(rel_err(y.t, yr.t), 2e-6) << at;
                for (int64_t g = 0; g < n_groups; ++g) {
                    const int64_t r0 = starts[size_t(g)], r1 = starts[size_t(g) + 1];
                    if (r0 == r1) continue;
                    Buf yg(DType::kF32, {r1 - r0, out});
                    ops::matmul(r.ex, x.t.rows(r0, r1), *ws[size_t(g)], p, yg.t);
                    EXPECT_TRUE(test::same_bits(yg.t, y.t.rows(r0, r1))) << at << " group " << g;
                }
            }
}

TEST_P(MatmulOps, MatmulRowsIndependentOfBatch) {
    Rng rng(2);
    const int64_t in = 77, out = 45;
    Buf x(DType::kF32, {9, in}, &rng), w(DType::kBF16, {out, in}, &rng), y(DType::kF32, {9, out});
    ops::matmul(r.ex, x.t, w.t, Precision::kBF16, y.t);
    for (int64_t t = 0; t < 9; ++t) {
        Buf y1(DType::kF32, {1, out});
        ops::matmul(r.ex, x.t.rows(t, t + 1), w.t, Precision::kBF16, y1.t);
        EXPECT_TRUE(test::same_bits(y1.t, y.t.rows(t, t + 1))) << "row " << t;
    }
}

// The kernels switch path with the number of token rows (direct from memory for few rows,
// widened and cache-blocked for many) and block the reduction in chunks: every row of every
// batch size must still match the one-row product bit for bit, and the scalar reference.
TEST_P(MatmulOps, MatmulPathsAgreeBitForBit) {
    Rng rng(12);
    for (Precision p : kPrecisions)
        for (DType wt : test::kFloatDtypes)
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
                    ref::matmul(r.ex, xs, w.t, p, yr.t);
                    EXPECT_LT(rel_err(y.t, yr.t), 2e-6) << what(wt, p, n, in, out);
                    for (int64_t t = 0; t < n; ++t)
                        ASSERT_TRUE(test::same_bits(single[size_t(t)].t, y.t.rows(t, t + 1)))
                            << "row " << t << " " << what(wt, p, n, in, out);
                }
            }
}

// Rows as wide as K3's (7168; here 7200 + a tail), too wide for a micro-tile's token rows to
// stay in L1, over many token rows and row blocks: every row of a 150-row product must equal
// its one-row product.
TEST_P(MatmulOps, WideRowsManyTokensAgreeBitForBit) {
    Rng rng(13);
    for (Precision p : kPrecisions)
        for (DType wt : {DType::kBF16, DType::kF32}) {
            const int64_t in = 7213, out = 29, n = 150;
            Buf x(DType::kF32, {n, in}, &rng), w(wt, {out, in}, &rng, 0.05), y(DType::kF32, {n, out}),
                yr(DType::kF32, {n, out});
            ops::matmul(r.ex, x.t, w.t, p, y.t);
            ref::matmul(r.ex, x.t, w.t, p, yr.t);
            // the tile order (bf16 products on AMX) sums each output in one chain of I terms, not 8
            // or 16 lanes: its rounding error grows about 3x faster with I (√I·u against √(I/8)·u)
            const bool one_chain = cpu::use_amx() && p == Precision::kBF16 && wt == DType::kBF16;
            EXPECT_LT(rel_err(y.t, yr.t), one_chain ? 6e-6 : 2e-6) << what(wt, p, n, in, out);
            for (int64_t t = 0; t < n; t += 7) {
                Buf y1(DType::kF32, {1, out});
                ops::matmul(r.ex, x.t.rows(t, t + 1), w.t, p, y1.t);
                ASSERT_TRUE(test::same_bits(y1.t, y.t.rows(t, t + 1))) << "row " << t << " " << what(wt, p, n, in, out);
            }
        }
}

INSTANTIATE_TEST_SUITE_P(Threads, MatmulOps, ::testing::Values(1, 2));

// Rounding activations to bf16: the vectorized AVX-512 build gives the bits of the scalar one,
// ties, NaNs, infinities and subnormals included.
TEST(Bf16Rounding, PortableAndAvx512AgreeBitForBit) {
    if (!cpu::use_avx512()) GTEST_SKIP() << "AVX-512 kernels off (the CPU lacks AVX-512, or KIMI_ISA lowers it)";
    Rng rng(22);
    const int64_t rows = 3, in = 77, ldx = 80;
    std::vector<float> x(size_t(rows * ldx));
    for (auto& v : x) v = float(rng.normal()) * 100.0f;
    const uint32_t special[] = {0x7fc00001u, 0xff800000u, 0x7f800000u, 0x00000001u,
                                0x80400000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu};
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

}   // namespace
}   // namespace kimi
