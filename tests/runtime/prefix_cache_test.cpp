// The hybrid prefix cache through the engine: a request that starts from cached MLA blocks
// and a KDA checkpoint produces the tokens and log-probabilities of a cold run bit for bit —
// at every checkpoint position, for Kimi Linear and Kimi-K3, in f32 and bf16, with the
// checkpoints captured inside one large chunk or at the ends of tiny ones, next to other
// requests, across preemption and under memory pressure — and the pools end full.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <ostream>

#include "engine_test_util.h"
#include "runtime/engine.h"
#include "test_models.h"

namespace kimi {
namespace {

using test::drain;
using test::expect_same;
using test::Out;

SamplingParams greedy(int32_t max_tokens = 8) {
    SamplingParams p;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.logprobs = 2;
    p.temperature = 0;
    return p;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

Out run_alone(const KimiModel& m, EngineConfig c, const std::vector<int32_t>& prompt, const SamplingParams& p) {
    Engine e(m, c);
    auto s = e.submit(prompt, p);
    e.run_until_idle();
    return drain(*s);
}

void expect_pools_full(const Engine& e, const std::string& what) {
    EXPECT_EQ(e.cache().blocks().n_free(), e.cache().blocks().n_total()) << what;
    EXPECT_EQ(e.cache().slots().n_free(), e.cache().slots().n_total()) << what;
}

struct Case {
    const char* preset;
    Precision precision;
};
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.preset << (c.precision == Precision::kF32 ? " f32" : " bf16");
}

class PrefixCache : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override {
        model_ = KimiModel::load(test::make_model(GetParam().preset, {}, 23));
        vocab_ = model_->config().vocab_size;
    }
    EngineConfig config(bool caching) const {
        EngineConfig c;
        c.threads = 2;
        c.precision = GetParam().precision;
        c.enable_prefix_caching = caching;
        return c;
    }
    void prompt_end_and_next_turn(int32_t budget);
    std::unique_ptr<KimiModel> model_;
    int64_t vocab_ = 0;
};

// A second request sharing the first `shared` tokens of an earlier one hits at the last
// checkpoint at or before the difference (every 16 tokens here), and matches a cold run. With
// the default token budget the first prompt runs as one chunk (checkpoints captured inside
// it); with a budget of 5 they fall inside or at the ends of many small chunks.
TEST_P(PrefixCache, HitAtEveryCheckpointPositionIsBitIdentical) {
    const auto first = test::random_tokens(70, vocab_, 31);
    const auto tail = test::random_tokens(20, vocab_, 32);
    for (int32_t shared : {1, 15, 16, 17, 33, 47, 48, 63, 64, 69}) {
        const auto second = concat(std::vector<int32_t>(first.begin(), first.begin() + shared), tail);
        const Out cold = run_alone(*model_, config(false), second, greedy());
        EXPECT_EQ(cold.cached_tokens, 0);
        for (int32_t budget : {256, 5}) {
            EngineConfig c = config(true);
            c.prefix_checkpoint_interval = 16;
            c.max_num_batched_tokens = budget;
            Engine e(*model_, c);
            auto a = e.submit(first, greedy());
            e.run_until_idle();
            drain(*a);
            auto b = e.submit(second, greedy());
            e.run_until_idle();
            const Out hit = drain(*b);
            const std::string what = "shared " + std::to_string(shared) + ", budget " + std::to_string(budget);
            expect_same(hit, cold, what);
            EXPECT_EQ(hit.cached_tokens, shared / 16 * 16) << what;
            EXPECT_EQ(e.prefix_hit_tokens(), shared / 16 * 16) << what;
            expect_pools_full(e, what);
        }
    }
}

// Default interval (256): a prompt sharing 280 tokens hits at 256; the identical prompt again
// hits at its own last full block (288 of 300); a chat's next turn (prompt + reply + more)
// resumes at the last full block of the previous turn's prompt + reply; a prompt of whole
// blocks again resumes one block before its end. The same whether the prompt runs in one chunk
// or one token per step (a 1-token prefill chunk is not a decode step: no extra checkpoints).
TEST_P(PrefixCache, PromptEndAndNextTurnCheckpoints) {
    for (int32_t budget : {256, 1}) {
        SCOPED_TRACE("budget " + std::to_string(budget));
        prompt_end_and_next_turn(budget);
    }
}

void PrefixCache::prompt_end_and_next_turn(int32_t budget) {
    EngineConfig c = config(true);
    c.max_model_len = 512;
    c.max_num_batched_tokens = budget;
    Engine e(*model_, c);
    const auto p1 = test::random_tokens(300, vocab_, 61);
    auto a = e.submit(p1, greedy(20));
    e.run_until_idle();
    const Out r1 = drain(*a);
    EXPECT_EQ(r1.cached_tokens, 0);

    const auto p2 = concat(std::vector<int32_t>(p1.begin(), p1.begin() + 280), test::random_tokens(10, vocab_, 62));
    auto b = e.submit(p2, greedy());
    e.run_until_idle();
    const Out r2 = drain(*b);
    EXPECT_EQ(r2.cached_tokens, 256);
    expect_same(r2, run_alone(*model_, config(false), p2, greedy()), "shares 280 tokens");

    auto again = e.submit(p1, greedy(20));
    e.run_until_idle();
    const Out r3 = drain(*again);
    EXPECT_EQ(r3.cached_tokens, 288);
    expect_same(r3, r1, "the same prompt again");

    // next turn: 300 prompt + 20 generated (19 in the cache when it ended: the last full block is 304)
    const auto p4 = concat(concat(p1, r1.tokens), test::random_tokens(7, vocab_, 63));
    auto d = e.submit(p4, greedy());
    e.run_until_idle();
    const Out r4 = drain(*d);
    EXPECT_EQ(r4.cached_tokens, 304);
    expect_same(r4, run_alone(*model_, config(false), p4, greedy()), "next turn");

    const auto p5 = test::random_tokens(64, vocab_, 64);   // four whole blocks
    for (int i = 0; i < 2; ++i) {
        auto f = e.submit(p5, greedy(1));
        e.run_until_idle();
        EXPECT_EQ(drain(*f).cached_tokens, i == 0 ? 0 : 48);
    }
    expect_pools_full(e, "end");
    const EngineSnapshot s = e.snapshot();
    EXPECT_EQ(s.prefix_queries, int64_t(p1.size() + p2.size() + p1.size() + p4.size() + 2 * p5.size()));
    EXPECT_EQ(s.prefix_hits, 256 + 288 + 304 + 48);
    // checkpoints: p1 at 256, 288, 304 (reply); p2 at 288 (its own last block); p4 at 320;
    // p5 at 48 and 64
    EXPECT_EQ(s.checkpoints, 7);
    EXPECT_GT(s.blocks_cached, 0);
    EXPECT_GT(s.checkpoints, 0);
    EXPECT_LE(s.checkpoints, s.checkpoints_total);
    EXPECT_EQ(s.checkpoint_bytes, int64_t(s.checkpoints) * e.sizing().slot_bytes);
}

// Requests sharing a prefix admitted while the first still runs share its blocks read-only
// (the same block ids, reference count 2): nobody's output changes; among others and under a
// tiny budget.
TEST_P(PrefixCache, SharedBlocksAreReadOnly) {
    const auto shared = test::random_tokens(48, vocab_, 71);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 4; ++i)
        prompts.push_back(concat(shared, test::random_tokens(5 + 3 * i, vocab_, 72 + uint64_t(i))));
    std::vector<Out> cold;
    for (const auto& p : prompts) cold.push_back(run_alone(*model_, config(false), p, greedy(12)));
    for (int32_t budget : {256, 7}) {
        EngineConfig c = config(true);
        c.prefix_checkpoint_interval = 16;
        c.max_num_batched_tokens = budget;
        Engine e(*model_, c);
        std::vector<std::shared_ptr<RequestStream>> streams;
        streams.push_back(e.submit(prompts[0], greedy(12)));
        while (e.cache().prefix_hash(streams[0]->id(), 3) == 0) ASSERT_TRUE(e.step());   // its 3 blocks are named
        for (size_t i = 1; i < prompts.size(); ++i) streams.push_back(e.submit(prompts[i], greedy(12)));
        e.step();
        e.step();
        bool saw_sharing = false;
        for (size_t i = 1; i < prompts.size(); ++i) {
            if (!e.cache().has(streams[i]->id()) || !e.cache().has(streams[0]->id())) continue;
            const auto t0 = e.cache().block_table(streams[0]->id()), ti = e.cache().block_table(streams[i]->id());
            if (ti.size() >= 3 && std::equal(t0.begin(), t0.begin() + 3, ti.begin())) {
                saw_sharing = true;
                EXPECT_GE(e.cache().blocks().ref_count(ti[0]), 2);
            }
        }
        EXPECT_TRUE(saw_sharing) << "budget " << budget;
        e.run_until_idle();
        for (size_t i = 0; i < prompts.size(); ++i) {
            const Out o = drain(*streams[i]);
            expect_same(o, cold[i], "request " + std::to_string(i) + ", budget " + std::to_string(budget));
            if (i > 0) {
                EXPECT_EQ(o.cached_tokens, 48);
            }
        }
        expect_pools_full(e, "budget " + std::to_string(budget));
    }
}

// Preemption with prefix caching: too few blocks for the crowd, so requests are preempted
// (their blocks become cached blocks) and recompute — partly from the cache — and every
// result equals its cold run.
TEST_P(PrefixCache, PreemptionStaysExact) {
    const auto shared = test::random_tokens(40, vocab_, 81);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 8; ++i)
        prompts.push_back(concat(shared, test::random_tokens(3 + 2 * i, vocab_, 82 + uint64_t(i))));
    EngineConfig c = config(true);
    c.max_model_len = 80;
    c.n_blocks = 10;   // 160 tokens of MLA cache for 8 requests of ~60 tokens
    c.prefix_checkpoint_interval = 16;
    c.max_num_seqs = 8;
    Engine e(*model_, c);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& p : prompts) {
        streams.push_back(e.submit(p, greedy(14)));
        e.step();
    }
    e.run_until_idle();
    EXPECT_GT(e.total_preemptions(), 0) << "the small cache must preempt";
    EXPECT_GT(e.prefix_hit_tokens(), 0);
    for (size_t i = 0; i < prompts.size(); ++i)
        expect_same(drain(*streams[i]), run_alone(*model_, config(false), prompts[i], greedy(14)),
                    "request " + std::to_string(i));
    expect_pools_full(e, "after preemption");
}

INSTANTIATE_TEST_SUITE_P(Models, PrefixCache,
                         ::testing::Values(Case{"tiny", Precision::kF32}, Case{"tiny", Precision::kBF16},
                                           Case{"k3-tiny", Precision::kF32}, Case{"k3-tiny", Precision::kBF16}),
                         [](const auto& info) {
                             std::string n = std::string(info.param.preset) +
                                 (info.param.precision == Precision::kF32 ? "_f32" : "_bf16");
                             std::replace(n.begin(), n.end(), '-', '_');
                             return n;
                         });

// Memory pressure: with the MLA pool just big enough for one full-length sequence and room
// for a single checkpoint, cached blocks and checkpoints are evicted least recently used
// first, a request that fits without the cache always runs, and repeats stay exact.
TEST(PrefixCacheMemory, EvictionNeverFailsARequest) {
    const auto model = KimiModel::load(test::make_model("tiny", {}, 24));
    const int64_t vocab = model->config().vocab_size;
    EngineConfig c;
    c.threads = 2;
    c.max_model_len = 96;
    c.n_blocks = 6;   // exactly one 96-token sequence
    c.prefix_checkpoint_interval = 16;
    c.prefix_cache_memory_bytes = model->cache_geometry(1, 1, 16).bytes_per_slot();   // one checkpoint
    Engine e(*model, c);
    ASSERT_EQ(e.sizing().n_checkpoints, 1);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 5; ++i) prompts.push_back(test::random_tokens(40 + 9 * i, vocab, 90 + uint64_t(i)));
    std::vector<Out> cold;
    EngineConfig off = c;
    off.enable_prefix_caching = false;
    for (const auto& p : prompts) cold.push_back(run_alone(*model, off, p, greedy(96 - int32_t(p.size()))));
    for (int round = 0; round < 2; ++round)
        for (size_t i = 0; i < prompts.size();
             ++i) {   // each fills the whole pool: the previous one's blocks are evicted
            auto s = e.submit(prompts[i], greedy(96 - int32_t(prompts[i].size())));
            e.run_until_idle();
            const Out o = drain(*s);
            expect_same(o, cold[i], "round " + std::to_string(round) + " prompt " + std::to_string(i));
            EXPECT_EQ(o.finish, FinishReason::kLength);
            EXPECT_LE(e.checkpoints().size(), 1);
            expect_pools_full(e, "prompt " + std::to_string(i));
        }
    // several at once: they wait for each other, evicting what is cached, and all finish
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& p : prompts) streams.push_back(e.submit(p, greedy(96 - int32_t(p.size()))));
    e.run_until_idle();
    for (size_t i = 0; i < prompts.size(); ++i)
        expect_same(drain(*streams[i]), cold[i], "concurrent " + std::to_string(i));
    expect_pools_full(e, "concurrent");
}

// Off: no checkpoints, no hits, cached_tokens 0.
TEST(PrefixCacheMemory, OffMeansNothingCached) {
    const auto model = KimiModel::load(test::make_model("tiny", {}, 24));
    EngineConfig c;
    c.enable_prefix_caching = false;
    Engine e(*model, c);
    EXPECT_EQ(e.sizing().n_checkpoints, 0);
    EXPECT_NE(e.sizing().describe().find("prefix cache off"), std::string::npos);
    const auto p = test::random_tokens(50, model->config().vocab_size, 5);
    for (int i = 0; i < 2; ++i) {
        auto s = e.submit(p, greedy());
        e.run_until_idle();
        EXPECT_EQ(drain(*s).cached_tokens, 0);
    }
    EXPECT_EQ(e.prefix_hit_tokens(), 0);
    EXPECT_EQ(e.snapshot().prefix_queries, 0);
    EXPECT_EQ(e.cache().blocks().n_cached(), 0);
}

}   // namespace
}   // namespace kimi
