// Op tests (see op_test.cpp for how to add an op): MLA over the paged latent cache — the cache
// write and the absorbed attention — against their scalar references, with f32 and bf16
// caches, permuted block tables, several sequences, with 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace kimi {
namespace {

using test::Buf;
using test::rel_err;
using test::same_bits;

class MlaOps : public ::testing::TestWithParam<int> {
protected:
    test::Runner r{GetParam()};
};

// The contents of a paged latent cache of n_blocks blocks, as f32 and as bf16 (the f32 values
// rounded); view() is the op parameter for one of the two.
struct Cache {
    Buf f32;
    std::vector<uint16_t> bf16;
    Cache(Rng& rng, int64_t n_blocks, int32_t block_size, int64_t width)
        : f32(DType::kF32, {n_blocks, block_size, width}, &rng), bf16(size_t(f32.t.numel())) {
        for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = f32_to_bf16(f32.f()[i]);
    }
    ops::PagedLatents view(bool use_bf16, int32_t block_size, std::span<const int32_t> tables, int32_t max_blocks) {
        return {use_bf16 ? nullptr : f32.f(),
                use_bf16 ? bf16.data() : nullptr,
                block_size,
                f32.t.dim(2),
                tables,
                max_blocks};
    }
    bool operator==(const Cache& o) const { return same_bits(f32.t, o.f32.t) && bf16 == o.bf16; }
};

// Every token's latents land at its position, through the block table, and nothing else moves.
TEST_P(MlaOps, MlaCacheWrite) {
    Rng rng(17);
    const int32_t bs = 4, max_blocks = 5;
    const std::vector<int32_t> tables{7, 2, 9, 0, 0, 4, 1, 8, 3, 0, 5, 6, 0, 0, 0};   // 3 sequences
    for (bool bf16 : {false, true})
        for (int64_t width : {1, 13, 45})
            for (auto [starts, past] : {std::pair<std::vector<int32_t>, std::vector<int32_t>>{{0, 5, 6, 9}, {3, 9, 0}},
                                        {{0, 1}, {11}},
                                        {{0, 0, 7, 8}, {2, 0, 7}}}) {
                Cache cache(rng, 10, bs, width), cache_ref = cache;
                Buf lat(DType::kF32, {starts.back(), width}, &rng);
                ops::mla_cache_write(r.ex, lat.t, cache.view(bf16, bs, tables, max_blocks), starts, past);
                ref::mla_cache_write(r.ex, lat.t, cache_ref.view(bf16, bs, tables, max_blocks), starts, past);
                EXPECT_TRUE(cache == cache_ref)
                    << (bf16 ? "bf16" : "f32") << " width " << width << " T=" << starts.back();
            }
}

TEST_P(MlaOps, MlaAttention) {
    Rng rng(6);
    const int32_t bs = 4, max_blocks = 5;
    const std::vector<int32_t> starts{0, 5, 6}, past{3, 9};   // seq 0: 5 new after 3; seq 1: 1 new after 9
    const std::vector<int32_t> tables{7, 2, 9, 0, 0, 4, 1, 8, 3, 0};
    for (auto [h, rank, rope] : {std::tuple<int64_t, int64_t, int64_t>{3, 10, 3}, {1, 1, 0}, {9, 33, 7}}) {
        const int64_t width = rank + rope;
        Buf q(DType::kF32, {6, h, width}, &rng), lat(DType::kF32, {6, width}, &rng), o32(DType::kF32, {6, h, rank});
        Cache cache(rng, 10, bs, width);
        for (bool bf16 : {false, true}) {
            const ops::PagedLatents pl = cache.view(bf16, bs, tables, max_blocks);
            ops::mla_cache_write(r.ex, lat.t, pl, starts, past);
            Buf o(DType::kF32, {6, h, rank}), orf(DType::kF32, {6, h, rank});
            ops::mla_attention(r.ex, q.t, pl, starts, past, 0.3f, o.t);
            ref::mla_attention(r.ex, q.t, pl, starts, past, 0.3f, orf.t);
            EXPECT_LT(rel_err(o.t, orf.t), 1e-5)
                << (bf16 ? "bf16" : "f32") << " H=" << h << " R=" << rank << " P=" << rope;
            if (!bf16)
                std::memcpy(o32.f(), o.f(), o.t.nbytes());
            else
                EXPECT_LT(rel_err(o.t, o32.t), 2e-2);   // the bf16 cache: close to the f32 one (rounding)
        }
    }
}

TEST_P(MlaOps, MlaAttentionLongContextTiles) {
    // Several online-softmax tiles, a head group of 8 plus a remainder, latent widths made of
    // 48-, 32- and 16-column chunks plus a tail (64 = 48 + 16 once wrote past each head's row):
    // against the reference, and each token alone == all tokens in one call, bit for bit.
    Rng rng(16);
    for (const int64_t rank : {40, 64, 112, 160, 250})
        for (bool bf16 : {false, true}) {
            const int64_t h = 11, rope = 5, width = rank + rope, n_new = 3;
            const int32_t bs = 16, max_blocks = 20, past = 290;
            std::vector<int32_t> tables(static_cast<size_t>(max_blocks));
            for (int32_t i = 0; i < max_blocks; ++i) tables[size_t(i)] = (i * 7 + 3) % max_blocks;   // a permutation
            Cache cache(rng, max_blocks, bs, width);
            const ops::PagedLatents pl = cache.view(bf16, bs, tables, max_blocks);
            Buf q(DType::kF32, {n_new, h, width}, &rng, 3.0), o(DType::kF32, {n_new, h, rank}),
                orf(DType::kF32, {n_new, h, rank});
            const std::vector<int32_t> starts{0, int32_t(n_new)}, pasts{past};
            ops::mla_attention(r.ex, q.t, pl, starts, pasts, 0.2f, o.t);
            ref::mla_attention(r.ex, q.t, pl, starts, pasts, 0.2f, orf.t);
            EXPECT_LT(rel_err(o.t, orf.t), 1e-5) << (bf16 ? "bf16" : "f32") << " rank " << rank;
            for (int64_t t = 0; t < n_new; ++t) {
                Buf one(DType::kF32, {1, h, rank});
                const std::vector<int32_t> s1{0, 1}, p1{int32_t(past + t)};
                ops::mla_attention(r.ex, q.t.rows(t, t + 1), pl, s1, p1, 0.2f, one.t);
                ASSERT_TRUE(same_bits(one.t, o.t.rows(t, t + 1))) << "token " << t << " rank " << rank;
            }
        }
}

INSTANTIATE_TEST_SUITE_P(Threads, MlaOps, ::testing::Values(1, 2));

}   // namespace
}   // namespace kimi
