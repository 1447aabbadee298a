// CheckpointPlanner with the cache bookkeeping alone (no model; a storage without KDA layers):
// captures at the interval and the prompt's positions inside a chunk, none for prefixes the
// store holds, and the tail checkpoint a request moves forward past its prompt.
#include <gtest/gtest.h>

#include <vector>

#include "cache/cache_manager.h"
#include "cache/cache_storage.h"
#include "cache/checkpoint_planner.h"
#include "cache/checkpoint_store.h"

namespace kimi {
namespace {

constexpr int32_t kBlock = 4, kSlots = 2, kCheckpoints = 4;

struct Harness {
    Harness()
        : cache(32, kBlock, kSlots, 16),
          store(kSlots, kCheckpoints, 0),
          storage(geometry()),
          plan(cache, store, storage, 8) {
        cache.enable_prefix_caching(1);
        for (int32_t i = 0; i < 40; ++i) tokens.push_back(100 + i);
    }
    static CacheGeometry geometry() {
        CacheGeometry g;
        g.n_slots = kSlots + kCheckpoints;
        g.n_blocks = 32;
        g.block_size = kBlock;
        return g;
    }
    CheckpointPlanner::TokenAt token_at() const {
        return [this](int64_t t) { return uint64_t(uint32_t(tokens[size_t(t)])); };
    }
    std::vector<int32_t> positions() const {
        std::vector<int32_t> at;
        for (const auto& c : plan.captures()) at.push_back(c.t);
        return at;
    }
    CacheManager cache;
    CheckpointStore store;
    CacheStorage storage;
    CheckpointPlanner plan;
    std::vector<int32_t> tokens;
};

TEST(CheckpointPlanner, CapturesIntervalAndPromptPositions) {
    Harness h;
    ASSERT_TRUE(h.cache.allocate(7, 22));
    h.plan.clear();
    // Prompt of 22 tokens in one chunk: the interval (8, 16) and the last full block (20).
    ASSERT_TRUE(h.plan.plan_chunk(0, 7, 0, 22, 22, h.token_at()));
    EXPECT_EQ(h.positions(), (std::vector<int32_t>{8, 16, 20}));
    h.plan.commit_captures();
    EXPECT_EQ(h.store.size(), 3);
    // The same prefix again: nothing new to capture.
    ASSERT_TRUE(h.cache.allocate(8, 22));
    h.plan.clear();
    ASSERT_TRUE(h.plan.plan_chunk(0, 8, 0, 22, 22, h.token_at()));
    EXPECT_TRUE(h.positions().empty());
}

TEST(CheckpointPlanner, TailCheckpointMovesPastThePrompt) {
    Harness h;
    ASSERT_TRUE(h.cache.allocate(7, 28));
    h.cache.commit_full_blocks(7, 28, h.token_at());
    EXPECT_EQ(h.plan.save_chunk_end(7, 21, 10, 0), 0u);        // not a block boundary
    const uint64_t t1 = h.plan.save_chunk_end(7, 20, 10, 0);   // past the prompt: a tail
    EXPECT_NE(t1, 0u);
    const uint64_t t2 = h.plan.save_chunk_end(7, 28, 10, t1);   // moved forward (overwrites its own)
    EXPECT_NE(t2, t1);
    EXPECT_FALSE(h.store.contains(t1));
    EXPECT_TRUE(h.store.contains(t2));
    EXPECT_EQ(h.plan.save_chunk_end(7, 24, 10, t2), t2);   // on the interval: kept, not the tail
    EXPECT_EQ(h.store.size(), 2);
}

}   // namespace
}   // namespace kimi
