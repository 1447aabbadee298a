// Products with GGUF block-type weights (every type of core/quant_blocks.h): each must equal,
// bit for bit, the product with an F32 weight holding the exactly decoded values, for any
// number of token rows, output range and thread count, in both activation precisions (the
// suite also runs with KIMI_ISA=avx2 and scalar: every kernel). And each token row equals its
// one-row product (batch invariance).
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"
#include "core/quant_blocks.h"
#include "op_test_util.h"

namespace kimi::test {
namespace {

// The f16 scale fields of each type's block (byte offsets): set to small positive values so
// the random weights stay O(0.1); the other bytes are random (every code, grid index, sign).
std::vector<int> scale_offsets(DType t) {
    switch (t) {
        case DType::kQ4_1:
        case DType::kQ5_1:
        case DType::kQ4_K:
        case DType::kQ5_K: return {0, 2};
        case DType::kQ2_K: return {80, 82};
        case DType::kQ3_K: return {108};
        case DType::kQ6_K: return {208};
        case DType::kTQ1_0: return {52};
        case DType::kTQ2_0: return {64};
        case DType::kMXFP4_GGML:
        case DType::kIQ1_M: return {};
        default: return {0};
    }
}

struct BlockBuf {
    std::vector<unsigned char> bytes;
    Tensor t;
    BlockBuf(DType dt, int64_t out, int64_t in, Rng& r) {
        t = Tensor(nullptr, dt, {out, in});
        bytes.assign(t.nbytes() + 64, 0);
        t.data = bytes.data();
        for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = uint8_t(r.below(256));
        const BlockShape b = dtype_block(dt);
        for (int64_t blk = 0; blk < t.numel() / b.elems; ++blk) {
            unsigned char* p = bytes.data() + blk * b.bytes;
            for (int off : scale_offsets(dt)) {
                const uint16_t h = f32_to_f16(float(0.002 + 0.018 * r.uniform()));
                std::memcpy(p + off, &h, 2);
            }
            if (dt == DType::kMXFP4_GGML) p[0] = uint8_t(118 + r.below(6));   // E8M0 near 2^-4
        }
    }
};

constexpr DType kBlockTypes[] = {DType::kQ4_0,   DType::kQ4_1,    DType::kQ5_0,       DType::kQ5_1,    DType::kQ8_0,
                                 DType::kQ2_K,   DType::kQ3_K,    DType::kQ4_K,       DType::kQ5_K,    DType::kQ6_K,
                                 DType::kIQ4_NL, DType::kIQ4_XS,  DType::kMXFP4_GGML, DType::kIQ2_XXS, DType::kIQ2_XS,
                                 DType::kIQ2_S,  DType::kIQ3_XXS, DType::kIQ3_S,      DType::kIQ1_S,   DType::kIQ1_M,
                                 DType::kTQ1_0,  DType::kTQ2_0};

class BlockQuantOps : public ::testing::TestWithParam<int> {
protected:
    Runner r{GetParam()};
};

// Whether this process multiplies bf16 activations with `dt` by the factored bf16 product
// (AVX-512 BF16: Q4_K, Q6_K, Q8_0) rather than through the decoded f32 rows.
bool factored(DType dt, Precision p) { return p == Precision::kBF16 && cpu::kernel_takes_bf16_bits(dt); }

TEST_P(BlockQuantOps, EqualsDecodedF32WeightsBitForBit) {
    Rng rng(31);
    for (DType dt : kBlockTypes) {
        const int64_t in = dtype_block(dt).elems * 3, out = 61;
        BlockBuf w(dt, out, in, rng);
        Buf wf(DType::kF32, {out, in});
        decode_f32(w.t, wf.f());
        for (Precision p : kPrecisions)
            for (int64_t n : {1, 2, 3, 4, 5, 16, 40}) {
                Buf x(DType::kF32, {n, in}, &rng), y(DType::kF32, {n, out}), yf(DType::kF32, {n, out}),
                    yr(DType::kF32, {n, out});
                ops::matmul(r.ex, x.t, w.t, p, y.t);
                if (factored(dt, p)) {   // another order of the same exact weights: against the reference
                    ref::matmul(r.ex, x.t, wf.t, p, yr.t);
                    ASSERT_LT(rel_err(y.t, yr.t), 1e-5) << dtype_name(dt) << " n=" << n;
                } else {
                    ops::matmul(r.ex, x.t, wf.t, p, yf.t);
                    ASSERT_TRUE(same_bits(y.t, yf.t)) << dtype_name(dt) << " n=" << n << " p=" << int(p);
                }
                for (int64_t t = 0; t < n; t += 3) {   // each row alone: the same bits (batch invariance)
                    Buf y1(DType::kF32, {1, out});
                    ops::matmul(r.ex, x.t.rows(t, t + 1), w.t, p, y1.t);
                    ASSERT_TRUE(same_bits(y1.t, y.t.rows(t, t + 1))) << dtype_name(dt) << " row " << t;
                }
                Buf ys(DType::kF32, {n, out - 7});   // an output range split elsewhere: the same bits
                ops::matmul(r.ex, x.t, w.t.rows(7, out), p, ys.t);
                for (int64_t t = 0; t < n; ++t)
                    ASSERT_EQ(0, std::memcmp(ys.f() + t * (out - 7), y.f() + t * out + 7, size_t(out - 7) * 4))
                        << dtype_name(dt) << " rows 7.. of token " << t;
            }
    }
}

// Grouped (MoE) products over experts of different block types: each group's rows equal the
// plain product with its expert, bit for bit, in both precisions.
TEST_P(BlockQuantOps, GroupedEqualsPlainProductsBitForBit) {
    Rng rng(32);
    const int64_t in = 512, out = 50, n = 23;
    std::vector<BlockBuf> ws;
    for (DType dt : {DType::kQ4_K, DType::kQ8_0, DType::kIQ2_XS, DType::kMXFP4_GGML}) ws.emplace_back(dt, out, in, rng);
    std::vector<const Tensor*> wq;
    for (const BlockBuf& w : ws) wq.push_back(&w.t);
    const std::vector<int32_t> starts = {0, 7, 7, 19, 23};
    for (Precision p : kPrecisions) {
        Buf x(DType::kF32, {n, in}, &rng), y(DType::kF32, {n, out});
        ops::matmul_grouped(r.ex, x.t, wq, starts, p, y.t);
        for (size_t g = 0; g < ws.size(); ++g) {
            const int64_t r0 = starts[g], r1 = starts[g + 1];
            if (r0 == r1) continue;
            Buf yg(DType::kF32, {r1 - r0, out});
            ops::matmul(r.ex, x.t.rows(r0, r1), ws[g].t, p, yg.t);
            ASSERT_TRUE(same_bits(yg.t, y.t.rows(r0, r1))) << dtype_name(ws[g].t.dtype) << " p=" << int(p);
        }
    }
}

// The factored products at prefill sizes (Q4_K and Q6_K in the sub-block lane order,
// kernels/quant_lanes_avx512.cpp; Q8_0, Q5_K, Q2_K per chunk, kernels/quant_avx512.cpp): rows in
// several panels, token rows in several L2 groups (wide rows), every tile remainder.
// Each token row equals its one-row product bit for bit and the whole is within 1e-5 of the
// reference product on the decoded weights.
TEST_P(BlockQuantOps, FactoredPanelsAndTokenGroups) {
    if (!cpu::kernel_takes_bf16_bits(DType::kQ4_K))
        std::printf("note: AVX-512 BF16 kernels off here: the bf16 rows check the decoded path instead\n");
    for (DType dt : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kQ5_K, DType::kQ2_K}) {
        Rng rng(34);
        const int64_t in = 256 * 40, out = 53, n = 41;
        BlockBuf w(dt, out, in, rng);
        Buf wf(DType::kF32, {out, in});
        decode_f32(w.t, wf.f());
        Buf x(DType::kF32, {n, in}, &rng), y(DType::kF32, {n, out}), yr(DType::kF32, {n, out});
        ops::matmul(r.ex, x.t, w.t, Precision::kBF16, y.t);
        ref::matmul(r.ex, x.t, wf.t, Precision::kBF16, yr.t);
        ASSERT_LT(rel_err(y.t, yr.t), 1e-5) << dtype_name(dt);
        for (int64_t t = 0; t < n; ++t) {
            Buf y1(DType::kF32, {1, out});
            ops::matmul(r.ex, x.t.rows(t, t + 1), w.t, Precision::kBF16, y1.t);
            ASSERT_TRUE(same_bits(y1.t, y.t.rows(t, t + 1))) << dtype_name(dt) << " row " << t;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, BlockQuantOps, ::testing::Values(1, 2));

// The vectorized decoders give the portable decoder's bits on every byte pattern: fully random
// blocks (scales of every f16 value: subnormal, huge, Inf, NaN) for each type they cover.
TEST(BlockQuantDecode, Avx512EqualsPortableBitForBit) {
    if (!cpu::use_avx512()) GTEST_SKIP() << "AVX-512 kernels off (the CPU lacks AVX-512, or KIMI_ISA lowers it)";
    Rng rng(33);
    int covered = 0;
    for (DType dt : kBlockTypes) {
        const BlockShape b = dtype_block(dt);
        const int64_t n_blocks = 4096;
        std::vector<uint8_t> raw(size_t(n_blocks * b.bytes));
        for (auto& v : raw) v = uint8_t(rng.below(256));
        std::vector<float> a(size_t(n_blocks * b.elems)), v(a.size());
        dequantize_blocks(dt, raw.data(), a.data(), int64_t(a.size()));
        if (!cpu::dequantize_blocks_avx512(dt, raw.data(), v.data(), int64_t(v.size()))) continue;
        ++covered;
        ASSERT_EQ(0, std::memcmp(a.data(), v.data(), a.size() * sizeof(float))) << dtype_name(dt);
    }
    EXPECT_EQ(covered, 11);
}

}   // namespace
}   // namespace kimi::test
