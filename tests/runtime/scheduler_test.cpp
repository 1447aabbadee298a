// Scheduler and cache pools with a fake model runner (no model, no tensors): budgets,
// max_num_seqs, chunked prefill, FCFS order, fairness between client requests, preemption order and identical output
// after recompute, aborts mid-prefill, and pools back to full after every mix.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "cache/cache_manager.h"
#include "cache/checkpoint_store.h"
#include "cache/hash_index.h"
#include "cache/prefix_hash.h"
#include "core/rng.h"
#include "runtime/scheduler.h"

namespace kimi {
namespace {

// The fake model: the next token is a hash of every known token, so a request's output
// depends only on its own tokens — recompute after preemption must reproduce it.
int32_t fake_next(const Request& r) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < r.num_tokens(); ++i) h = (h ^ uint64_t(r.token_at(i))) * 1099511628211ull;
    return int32_t(h % 1000);
}

struct Harness {
    Harness(int32_t n_blocks, int32_t n_slots, SchedulerConfig cfg)
        : cache(n_blocks, 4, n_slots, 64), sched(cfg, cache), cfg(cfg) {}

    // group 0: a group of its own (as Engine::submit does).
    Request* add(int32_t prompt_len, int32_t max_tokens, uint64_t group = 0) {
        auto r = std::make_unique<Request>();
        r->id = next_id++;
        r->group = group != 0 ? group : r->id + 1000000;
        for (int32_t i = 0; i < prompt_len; ++i) r->prompt.push_back(int32_t((r->id * 31 + uint64_t(i)) % 1000));
        r->params.max_tokens = max_tokens;
        sched.add(r.get());
        reqs.push_back(std::move(r));
        return reqs.back().get();
    }

    // One step; returns the plan. Checks the invariants every step.
    const ScheduleOutput& step() {
        sched.schedule(plan);
        EXPECT_LE(plan.total_tokens, cfg.max_num_batched_tokens);
        EXPECT_LE(sched.n_running(), cfg.max_num_seqs);
        int32_t sum = 0;
        for (const auto& s : plan.scheduled) {
            EXPECT_GT(s.n_tokens, 0);
            EXPECT_LE(s.req->n_computed + s.n_tokens - s.n_draft, s.req->num_tokens());
            sum += s.n_tokens;
            max_chunk[s.req->id] = std::max(max_chunk[s.req->id], s.n_tokens);
        }
        EXPECT_EQ(sum, plan.total_tokens);
        for (Request* p : plan.preempted) preempted_order.push_back(p->id);
        sched.step_done(plan);
        for (const auto& s : plan.scheduled) {
            Request& r = *s.req;
            if (r.n_computed != r.num_tokens()) continue;
            r.output.push_back(fake_next(r));
            if (int32_t(r.output.size()) >= r.params.max_tokens) sched.finish(&r, FinishReason::kLength);
        }
        ++n_steps;
        return plan;
    }

    void run_to_completion(int max_steps = 10000) {
        while (sched.has_work() && n_steps < max_steps) step();
        EXPECT_FALSE(sched.has_work());
    }

    void expect_pools_full() const {
        EXPECT_EQ(cache.blocks().n_free(), cache.blocks().n_total());
        EXPECT_EQ(cache.slots().n_free(), cache.slots().n_total());
    }

    CacheManager cache;
    Scheduler sched;
    SchedulerConfig cfg;
    ScheduleOutput plan;
    std::vector<std::unique_ptr<Request>> reqs;
    std::map<uint64_t, int32_t> max_chunk;
    std::vector<uint64_t> preempted_order;
    uint64_t next_id = 1;
    int n_steps = 0;
};

TEST(Pools, BlockAndStatePools) {
    BlockPool b(3);
    auto x = b.allocate(), y = b.allocate(), z = b.allocate();
    ASSERT_TRUE(x && y && z);
    EXPECT_FALSE(b.allocate());
    b.retain(*y);
    b.release(*y);
    EXPECT_EQ(b.n_free(), 0);
    b.release(*y);
    EXPECT_EQ(b.n_free(), 1);
    EXPECT_EQ(*b.allocate(), *y);
    StatePool s(2);
    auto a = s.acquire(), c = s.acquire();
    ASSERT_TRUE(a && c);
    EXPECT_FALSE(s.acquire());
    s.release(*a);
    EXPECT_EQ(s.n_free(), 1);
}

// Prefix caching's block bookkeeping: hashed blocks outlive their last reference as cached
// blocks, are found and shared again by hash, are evicted oldest-released first only when no
// free block is left, and an unhashed or duplicate-hash block is simply freed.
TEST(Pools, CachedBlocksLruAndSharing) {
    BlockPool b(4);
    const int32_t x = *b.allocate(), y = *b.allocate(), z = *b.allocate();
    const std::vector<uint64_t> t1{1, 2, 3, 4}, t2{5, 6, 7, 8};
    const uint64_t h1 = block_hash(0, t1, 7), h2 = block_hash(h1, t2, 7);
    EXPECT_NE(h1, h2);
    EXPECT_NE(block_hash(0, t1, 8), h1);   // the salt (e.g. precision) is part of the name
    b.set_hash(x, h1);
    b.set_hash(y, h2);
    b.set_hash(z, h1);   // duplicate content: stays unnamed
    EXPECT_EQ(b.hash_of(z), 0u);
    EXPECT_EQ(*b.find(h1), x);
    b.release(z);   // unnamed: back to the free list
    b.release(y);   // named: cached (released first → evicted first)
    b.release(x);
    EXPECT_EQ(b.n_cached(), 2);
    EXPECT_EQ(b.n_free(), 4);   // 2 free + 2 evictable
    // a new request sharing the first block takes it back out of the eviction order
    b.retain(x);
    EXPECT_EQ(b.ref_count(x), 1);
    EXPECT_EQ(b.n_cached(), 1);
    // allocations use free blocks first, then evict the oldest cached one (y) and forget its hash
    const int32_t f1 = *b.allocate(), f2 = *b.allocate();
    EXPECT_NE(f1, y);
    EXPECT_NE(f2, y);
    EXPECT_EQ(*b.allocate(), y);
    EXPECT_FALSE(b.find(h2));
    EXPECT_FALSE(b.allocate());   // x is in use: never evicted
    EXPECT_EQ(*b.find(h1), x);
    for (int32_t blk : {x, f1, f2, y}) b.release(blk);
    EXPECT_EQ(b.n_free(), 4);
    EXPECT_EQ(b.n_cached(), 1);   // x keeps its contents until its memory is needed
}

// KDA checkpoints: slots past the running ones. A slot's whole recurrent state saved under a
// prefix hash and restored into another slot bit for bit; least recently used reused first;
// a sequence's moving checkpoint overwrites itself; entries being written are never handed out
// twice; a duplicate name frees the second entry; no entries keeps nothing.
TEST(Pools, CheckpointStoreSavesRestoresEvicts) {
    CacheGeometry g;
    g.n_kda_layers = 2;
    g.kda_heads = 2;
    g.kda_head_dim = 4;
    g.conv_kernel = 4;
    g.n_slots = 5;   // 0, 1 running; 2..4 checkpoints
    g.n_blocks = 1;
    CacheStorage st(g);
    auto fill = [&](int32_t slot, float base) {
        for (int64_t l = 0; l < g.n_kda_layers; ++l) {
            const ops::SlotState s = st.kda_state(l), c = st.conv_state(l, 0);
            for (int64_t i = 0; i < g.state_floats_per_slot(); ++i)
                s.base[slot * s.slot_stride + i] = base + float(l * 100 + i);
            for (int64_t i = 0; i < g.conv_floats_per_slot(); ++i)
                c.base[slot * c.slot_stride + i] = -base - float(l * 100 + i);
        }
    };
    auto snapshot = [&](int32_t slot) {
        std::vector<float> v;
        for (int64_t l = 0; l < g.n_kda_layers; ++l) {
            const ops::SlotState s = st.kda_state(l), c = st.conv_state(l, 0);
            v.insert(v.end(), s.base + slot * s.slot_stride, s.base + (slot + 1) * s.slot_stride);
            v.insert(v.end(), c.base + slot * c.slot_stride, c.base + (slot + 1) * c.slot_stride);
        }
        return v;
    };
    CheckpointStore cp(2, 2, g.bytes_per_slot());
    EXPECT_EQ(cp.capacity(), 2);
    fill(0, 1.0f);
    EXPECT_TRUE(cp.save(11, st, 0));
    const auto first = snapshot(0);
    fill(0, 2.0f);
    EXPECT_TRUE(cp.save(22, st, 0));
    EXPECT_FALSE(cp.save(22, st, 0));   // already there
    const auto second = snapshot(0);
    ASSERT_NE(first, second);
    ASSERT_TRUE(cp.restore(11, st, 1));   // 11 is now the most recently used
    EXPECT_EQ(snapshot(1), first);
    st.reset_slot(1);
    EXPECT_TRUE(cp.save(33, st, 1));   // full: reuses 22's entry (least recently used)
    EXPECT_FALSE(cp.contains(22));
    EXPECT_TRUE(cp.contains(11) && cp.contains(33));
    EXPECT_FALSE(cp.restore(22, st, 1));
    EXPECT_EQ(cp.bytes_used(), 2 * g.bytes_per_slot());
    // a moving checkpoint: 33 → 44 in place, 11 untouched
    fill(0, 3.0f);
    EXPECT_TRUE(cp.save(44, st, 0, 33));
    EXPECT_FALSE(cp.contains(33));
    ASSERT_TRUE(cp.restore(11, st, 1));
    EXPECT_EQ(snapshot(1), first);
    ASSERT_TRUE(cp.restore(44, st, 1));
    EXPECT_EQ(snapshot(1), snapshot(0));
    // two writes in flight take both entries; a third finds none; a duplicate name frees its entry
    const auto a = cp.begin(), b = cp.begin();
    ASSERT_TRUE(a && b);
    EXPECT_NE(*a, *b);
    EXPECT_GE(std::min(*a, *b), 2);
    EXPECT_FALSE(cp.begin());
    EXPECT_EQ(cp.size(), 0);   // what they held is forgotten
    st.copy_slot(0, *a);
    cp.commit(*a, 55);
    cp.commit(*b, 55);
    EXPECT_EQ(cp.size(), 1);
    ASSERT_TRUE(cp.restore(55, st, 1));
    EXPECT_EQ(snapshot(1), snapshot(0));
    const auto c = cp.begin();
    ASSERT_TRUE(c);
    EXPECT_EQ(*c, *b);   // the freed entry, not 55's
    cp.abandon(*c);
    EXPECT_TRUE(cp.contains(55));
    CheckpointStore none(2, 0, g.bytes_per_slot());
    EXPECT_FALSE(none.save(11, st, 0));
    EXPECT_EQ(none.size(), 0);
}

// The allocation-free hash index behind both: random inserts and erases against std::map.
TEST(Pools, HashIndexMatchesAMap) {
    HashIndex h(300);
    std::map<uint64_t, int32_t> ref;
    uint64_t x = 12345;
    for (int i = 0; i < 20000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t key = 1 + (x >> 33) % 600;   // collisions and long probe runs
        if ((x >> 20) & 1) {
            if (int64_t(ref.size()) < 300) {
                EXPECT_EQ(h.insert(key, int32_t(i)), ref.emplace(key, int32_t(i)).second);
            }
        } else {
            h.erase(key);
            ref.erase(key);
        }
        ASSERT_EQ(h.size(), int64_t(ref.size()));
        if (i % 97 == 0)
            for (uint64_t k = 1; k <= 600; ++k) {
                const auto it = ref.find(k);
                const auto got = h.find(k);
                ASSERT_EQ(got.has_value(), it != ref.end()) << k;
                if (got) {
                    EXPECT_EQ(*got, it->second);
                }
            }
    }
    EXPECT_FALSE(h.contains(0));
}

TEST(Pools, CacheManagerGrowsAndFrees) {
    CacheManager m(10, 4, 2, 5);
    EXPECT_TRUE(m.allocate(1, 5));   // 2 blocks + slot
    EXPECT_EQ(m.block_table(1).size(), 2u);
    EXPECT_TRUE(m.allocate(1, 8));   // still 2 blocks
    EXPECT_EQ(m.block_table(1).size(), 2u);
    EXPECT_FALSE(m.allocate(2, 21));   // 6 blocks > max per sequence
    EXPECT_TRUE(m.allocate(2, 20));
    EXPECT_FALSE(m.can_allocate(3, 1));   // no slot left
    EXPECT_TRUE(m.allocate(1, 17));       // 5 blocks: takes the last 3 free ones
    EXPECT_FALSE(m.allocate(2, 21));      // 6 blocks > max per sequence
    m.free(2);
    m.free(1);
    EXPECT_EQ(m.blocks().n_free(), 10);
    EXPECT_EQ(m.slots().n_free(), 2);
}

TEST(Scheduler, BudgetChunksLongPrompts) {
    Harness h(256, 8, {4, 16});
    Request* big = h.add(100, 3);
    Request* small = h.add(5, 3);
    h.run_to_completion();
    EXPECT_EQ(h.max_chunk[big->id], 16);
    EXPECT_EQ(big->output.size(), 3u);
    EXPECT_EQ(small->output.size(), 3u);
    h.expect_pools_full();
}

TEST(Scheduler, NewRequestsJoinWhileOthersDecode) {
    Harness h(256, 8, {8, 64});
    Request* a = h.add(10, 20);
    h.step();
    h.step();
    Request* b = h.add(10, 5);
    const ScheduleOutput& p = h.step();
    bool a_in = false, b_in = false;
    for (const auto& s : p.scheduled) {
        a_in |= s.req == a;
        b_in |= s.req == b;
    }
    EXPECT_TRUE(a_in && b_in);
    h.run_to_completion();
    h.expect_pools_full();
}

TEST(Scheduler, NoStarvationUnderTinyBudget) {
    Harness h(512, 16, {6, 3});
    std::vector<Request*> all;
    for (int i = 0; i < 12; ++i) all.push_back(h.add(3 + i * 2, 4));
    h.run_to_completion();
    for (Request* r : all) {
        EXPECT_EQ(r->status, RequestStatus::kFinished);
        EXPECT_EQ(r->output.size(), 4u);
    }
    h.expect_pools_full();
}

TEST(Scheduler, PreemptsNewestFirstAndRecomputesIdentically) {
    // Reference run with a roomy cache.
    std::vector<std::vector<int32_t>> expected;
    {
        Harness ref(1024, 8, {8, 64});
        for (int i = 0; i < 6; ++i) ref.add(6 + i, 24);
        ref.run_to_completion();
        for (auto& r : ref.reqs) expected.push_back(r->output);
        EXPECT_TRUE(ref.preempted_order.empty());
    }
    Harness h(24, 8, {8, 64});   // 24 blocks of 4 tokens: not enough for 6 × (≈9 + 24)
    for (int i = 0; i < 6; ++i) h.add(6 + i, 24);
    h.run_to_completion();
    ASSERT_FALSE(h.preempted_order.empty());
    // The first victim is the newest running request.
    EXPECT_EQ(h.preempted_order.front(), 6u);
    for (size_t i = 0; i < h.reqs.size(); ++i) EXPECT_EQ(h.reqs[i]->output, expected[i]) << "request " << i + 1;
    h.expect_pools_full();
}

TEST(Scheduler, AbortMidPrefillFreesEverything) {
    Harness h(256, 4, {4, 8});
    Request* a = h.add(40, 5);
    Request* b = h.add(4, 5);
    h.step();   // a is mid-prefill
    EXPECT_GT(a->n_computed, 0);
    EXPECT_LT(a->n_computed, 40);
    a->abort_requested = true;
    h.step();
    EXPECT_EQ(a->status, RequestStatus::kFinished);
    EXPECT_EQ(a->finish, FinishReason::kAbort);
    EXPECT_FALSE(h.cache.has(a->id));
    ASSERT_EQ(h.sched.finished().size(), 1u);
    Request* c = h.add(4, 3);
    c->abort_requested = true;   // aborted while waiting
    h.run_to_completion();
    EXPECT_EQ(b->output.size(), 5u);
    EXPECT_EQ(c->finish, FinishReason::kAbort);
    h.expect_pools_full();
}

// Fairness between client requests: one request of 32 sequences × 200 tokens fills the batch;
// a 2-token request arriving later is admitted at the next step (preempting one of the big
// request's sequences) and finishes within a few steps, where FCFS would keep it waiting for
// the big request's whole length. The preempted sequence recomputes to the same output, and a
// second big request gets its fair half of the batch, never more: no ping-pong.
TEST(Scheduler, ManySequencesCannotStarveASmallRequest) {
    std::vector<std::vector<int32_t>> expected;
    {
        Harness ref(4096, 8, {8, 64});
        for (int i = 0; i < 32; ++i) ref.add(5, 200, 1);
        ref.run_to_completion();
        for (auto& r : ref.reqs) expected.push_back(r->output);
    }
    Harness h(4096, 8, {8, 64});
    for (int i = 0; i < 32; ++i) h.add(5, 200, 1);
    for (int i = 0; i < 10; ++i) h.step();
    EXPECT_EQ(h.sched.n_running(), 8);
    Request* small = h.add(3, 2, 2);
    const int at = h.n_steps;
    while (small->status != RequestStatus::kFinished && h.n_steps < at + 100) h.step();
    EXPECT_EQ(small->output.size(), 2u);
    EXPECT_LE(h.n_steps - at, 3) << "the 2-token request waited behind the 32-sequence one";
    EXPECT_EQ(h.sched.fair_preemptions(), 1);
    // A second many-sequence request shares the batch half and half.
    for (int i = 0; i < 8; ++i) h.add(5, 50, 3);
    for (int i = 0; i < 4; ++i) h.step();
    int32_t in_group3 = 0;
    for (const auto& s : h.plan.scheduled) in_group3 += s.req->group == 3;
    EXPECT_EQ(in_group3, 4);
    const int64_t fair_after = h.sched.fair_preemptions();
    for (int i = 0; i < 10; ++i) h.step();
    EXPECT_EQ(h.sched.fair_preemptions(), fair_after) << "a fair batch must not keep preempting";
    h.run_to_completion();
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(h.reqs[i]->output, expected[i]) << "sequence " << i;
    h.expect_pools_full();
}

// Speculative decoding: a draft runs with its request's last token, within the budget, and
// only the tokens verification accepts advance the request; the blocks past them go back.
TEST(Scheduler, DraftsRunWithTheLastTokenAndOnlyAcceptedOnesCount) {
    Harness h(64, 4, {4, 16});
    Request* r = h.add(6, 50);
    h.step();   // the prompt, then one token
    ASSERT_EQ(r->n_computed, 6);
    ASSERT_EQ(r->num_tokens(), 7);
    r->draft = {5, 6, 7};
    h.sched.schedule(h.plan);
    ASSERT_EQ(h.plan.scheduled.size(), 1u);
    EXPECT_EQ(h.plan.scheduled[0].n_tokens, 4);
    EXPECT_EQ(h.plan.scheduled[0].n_draft, 3);
    EXPECT_EQ(r->token_at(7), 5);
    EXPECT_EQ(r->token_at(9), 7);
    EXPECT_EQ(h.cache.block_table(r->id).size(), 3u);   // 10 tokens in blocks of 4
    h.sched.step_done(h.plan);
    EXPECT_EQ(r->n_computed, 7) << "the known token only";
    r->output.push_back(5);    // the draft's first token accepted,
    r->output.push_back(99);   // then the target's own
    h.sched.accept_draft(r, 1);
    EXPECT_EQ(r->n_computed, 8);
    EXPECT_TRUE(r->draft.empty());
    EXPECT_EQ(h.cache.block_table(r->id).size(), 2u) << "the blocks past the accepted tokens are released";

    r->draft.assign(20, 3);   // longer than the budget: cut to it
    h.sched.schedule(h.plan);
    EXPECT_EQ(h.plan.scheduled[0].n_tokens, 16);
    EXPECT_EQ(h.plan.scheduled[0].n_draft, 15);
    EXPECT_EQ(r->draft.size(), 15u);
    h.sched.step_done(h.plan);
    r->output.push_back(42);   // nothing accepted: the target's token only
    h.sched.accept_draft(r, 0);
    EXPECT_EQ(r->n_computed, 9);
    EXPECT_EQ(h.cache.block_table(r->id).size(), 3u);

    Harness tight(3, 4, {4, 16});   // 12 tokens of cache: a draft that needs more is dropped, nobody preempted
    Request* a = tight.add(6, 50);
    Request* b = tight.add(3, 50);
    tight.step();
    a->draft.assign(6, 1);   // 7 + 6 tokens: 4 blocks for a alone
    tight.sched.schedule(tight.plan);
    EXPECT_TRUE(tight.plan.preempted.empty());
    EXPECT_EQ(tight.plan.scheduled[0].n_draft, 0);
    EXPECT_TRUE(a->draft.empty());
    EXPECT_EQ(tight.plan.scheduled.size(), 2u);
    tight.sched.step_done(tight.plan);
    for (Request* x : {a, b}) tight.sched.finish(x, FinishReason::kLength);
    tight.expect_pools_full();
    h.sched.finish(r, FinishReason::kLength);
    h.expect_pools_full();
}

TEST(Scheduler, RandomMixLeavesPoolsFull) {
    Rng rng(3);
    for (int trial = 0; trial < 20; ++trial) {
        Harness h(int32_t(20 + rng.below(60)), 6, {int32_t(1 + rng.below(6)), int32_t(1 + rng.below(40))});
        for (int i = 0; i < 10; ++i) h.add(int32_t(1 + rng.below(30)), int32_t(1 + rng.below(12)), rng.below(3));
        for (int s = 0; s < 2000 && h.sched.has_work(); ++s) {
            if (rng.below(10) == 0) h.reqs[rng.below(h.reqs.size())]->abort_requested = true;
            h.step();
        }
        EXPECT_FALSE(h.sched.has_work());
        h.expect_pools_full();
    }
}

}   // namespace
}   // namespace kimi
