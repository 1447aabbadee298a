// Tensor-parallel weight slices: rows (column-parallel, a view) and columns (row-parallel, a
// copy) hold exactly the original elements, for BF16 and MXFP4 weights (MXFP4 at its
// 32-column groups); the partial products of a row-parallel split add up to the full product;
// bad ranges are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "dist/comm.h"
#include "checkpoint/weight_shard.h"
#include "ops/ops.h"
#include "test_models.h"

namespace kimi {
namespace {

struct Weights {
    std::vector<uint16_t> bf16;
    std::vector<uint8_t> packed, scale;
    Tensor dense, mxfp4;
};

Weights make_weights(int64_t out, int64_t in, uint64_t seed) {
    Weights w;
    Rng rng(seed);
    w.bf16.resize(size_t(out * in));
    for (auto& v : w.bf16) v = f32_to_bf16(float(rng.normal()));
    w.packed.resize(size_t(out * in / 2));
    for (auto& v : w.packed) v = uint8_t(rng.below(256));
    w.scale.resize(size_t(out * in / kMxfp4Group));
    for (auto& v : w.scale) v = uint8_t(120 + rng.below(12));
    w.dense = Tensor(w.bf16.data(), DType::kBF16, {out, in});
    w.mxfp4 = Tensor(w.packed.data(), DType::kMXFP4, {out, in});
    w.mxfp4.scale = w.scale.data();
    return w;
}

TEST(WeightShard, SlicesHoldTheOriginalElements) {
    WeightStore store(test::make_model("tiny", {}, 3));
    const int64_t out = 24, in = 96;
    const Weights w = make_weights(out, in, 5);
    for (const Tensor* full : {&w.dense, &w.mxfp4}) {
        for (int parts : {1, 2, 3}) {
            for (int r = 0; r < parts; ++r) {
                const dist::Range rows = dist::split(out, parts, r);
                const Tensor a = shard_rows(*full, rows.begin, rows.end);
                ASSERT_EQ(a.dim(0), rows.size());
                for (int64_t i = 0; i < rows.size() * in; ++i)
                    ASSERT_EQ(element_f32(a, i), element_f32(*full, rows.begin * in + i));
                const dist::Range g = dist::split(in / kMxfp4Group, parts, r);   // column groups of 32
                const int64_t c0 = g.begin * kMxfp4Group, c1 = g.end * kMxfp4Group;
                const Tensor b = shard_cols(store, *full, c0, c1);
                ASSERT_EQ(b.dim(0), out);
                ASSERT_EQ(b.dim(1), c1 - c0);
                EXPECT_EQ(b.dtype, full->dtype);
                for (int64_t i = 0; i < out; ++i)
                    for (int64_t j = 0; j < c1 - c0; ++j)
                        ASSERT_EQ(element_f32(b, i * (c1 - c0) + j), element_f32(*full, i * in + c0 + j))
                            << i << "," << j;
            }
        }
    }
    EXPECT_THROW(shard_cols(store, w.mxfp4, 16, 48), Error);   // not at a 32-column group
    EXPECT_THROW(shard_cols(store, w.dense, 10, 97), Error);
    EXPECT_THROW(shard_rows(w.dense, 5, 4), Error);
    EXPECT_NO_THROW(shard_cols(store, w.dense, 10, 21));   // BF16: any columns
}

// y = x Wᵀ split by input columns: Σ_r x[:, c_r] W[:, c_r]ᵀ is y (f32 sums in another order).
TEST(WeightShard, RowParallelPartialsAddUp) {
    WeightStore store(test::make_model("tiny", {}, 3));
    const int64_t out = 20, in = 128, t = 3;
    const Weights w = make_weights(out, in, 7);
    test::Runner run(1);
    std::vector<float> x(size_t(t * in));
    Rng rng(9);
    for (auto& v : x) v = float(rng.normal());
    for (const Tensor* full : {&w.dense, &w.mxfp4}) {
        std::vector<float> y(size_t(t * out)), sum(size_t(t * out), 0.0f), part(size_t(t * out));
        Tensor yt(y.data(), DType::kF32, {t, out});
        ops::matmul(run.ex, Tensor(x.data(), DType::kF32, {t, in}), *full, Precision::kF32, yt);
        for (int r = 0; r < 3; ++r) {
            const dist::Range g = dist::split(in / kMxfp4Group, 3, r);
            const int64_t c0 = g.begin * kMxfp4Group, c1 = g.end * kMxfp4Group;
            std::vector<float> xs(size_t(t * (c1 - c0)));
            for (int64_t i = 0; i < t; ++i)
                for (int64_t j = c0; j < c1; ++j) xs[size_t(i * (c1 - c0) + j - c0)] = x[size_t(i * in + j)];
            Tensor pt(part.data(), DType::kF32, {t, out});
            ops::matmul(run.ex, Tensor(xs.data(), DType::kF32, {t, c1 - c0}), shard_cols(store, *full, c0, c1),
                        Precision::kF32, pt);
            for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
        }
        for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(sum[i], y[i], 1e-4 * (1.0 + std::fabs(y[i]))) << i;
    }
}

}   // namespace
}   // namespace kimi
