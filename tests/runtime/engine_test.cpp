// Invariance through the runtime: a request's greedy tokens and logprobs, and its seeded
// samples, are bit-identical alone, alongside 15 others of different lengths arriving at
// different times, under a tiny token budget (heavy chunking), and after preemption.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/engine.h"
#include "test_models.h"

namespace kimi {
namespace {

struct Out {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    FinishReason finish = FinishReason::kNone;
};

Out drain(RequestStream& s) {
    Out o;
    TokenEvent e;
    while (s.next(e)) {
        if (e.token >= 0) {
            o.tokens.push_back(e.token);
            o.logprobs.push_back(e.logprob);
        }
        o.finish = e.finish;
    }
    return o;
}

class EngineInvariance : public ::testing::Test {
protected:
    static void SetUpTestSuite() { model_ = KimiLinearModel::load(test::make_model("tiny", {}, 21)).release(); }
    static void TearDownTestSuite() { delete model_; }
    static KimiLinearModel* model_;

    SamplingParams params(bool greedy) {
        SamplingParams p;
        p.max_tokens = 12;
        p.ignore_eos = true;
        p.logprobs = 2;
        if (greedy) p.temperature = 0;
        else { p.temperature = 0.9f; p.top_p = 0.95f; p.seed = 77; }
        return p;
    }

    Out alone(const std::vector<int32_t>& prompt, bool greedy) {
        EngineConfig c;
        c.threads = 2;
        Engine e(*model_, c);
        auto s = e.submit(prompt, params(greedy));
        e.run_until_idle();
        return drain(*s);
    }

    // The probe request alongside 15 others submitted at different steps.
    Out crowded(const std::vector<int32_t>& prompt, bool greedy, EngineConfig c) {
        Engine e(*model_, c);
        std::vector<std::shared_ptr<RequestStream>> others;
        std::shared_ptr<RequestStream> probe;
        for (int i = 0; i < 16; ++i) {
            if (i == 5) probe = e.submit(prompt, params(greedy));
            SamplingParams p = params(i % 2 == 0);
            p.max_tokens = 3 + i % 7;
            others.push_back(e.submit(test::random_tokens(2 + 3 * i, model_->config().vocab_size, 100 + uint64_t(i)), p));
            e.step();
        }
        e.run_until_idle();
        for (auto& o : others) EXPECT_EQ(drain(*o).finish, FinishReason::kLength);
        EXPECT_EQ(e.cache().blocks().n_free(), e.cache().blocks().n_total());
        EXPECT_EQ(e.cache().slots().n_free(), e.cache().slots().n_total());
        return drain(*probe);
    }
};
KimiLinearModel* EngineInvariance::model_ = nullptr;

void expect_same(const Out& a, const Out& b, const char* what) {
    EXPECT_EQ(a.tokens, b.tokens) << what;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
    EXPECT_EQ(0, std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float))) << what;
    EXPECT_EQ(a.finish, b.finish) << what;
}

TEST_F(EngineInvariance, GreedyAndSeeded) {
    const auto prompt = test::random_tokens(30, model_->config().vocab_size, 9);
    for (bool greedy : {true, false}) {
        const Out ref = alone(prompt, greedy);
        ASSERT_EQ(ref.tokens.size(), 12u);
        EngineConfig batched;
        batched.threads = 2;
        batched.max_num_seqs = 16;
        expect_same(crowded(prompt, greedy, batched), ref, "16 concurrent requests");
        EngineConfig tiny_budget = batched;
        tiny_budget.max_num_batched_tokens = 5;
        expect_same(crowded(prompt, greedy, tiny_budget), ref, "token budget 5");
        EngineConfig small_cache = batched;
        small_cache.max_model_len = 64;
        small_cache.n_blocks = 8;   // 128 tokens of MLA cache for 16 requests: preemption
        expect_same(crowded(prompt, greedy, small_cache), ref, "preemption");
    }
}

TEST_F(EngineInvariance, RejectsWhatCanNeverFit) {
    EngineConfig c;
    c.max_model_len = 32;
    Engine e(*model_, c);
    SamplingParams p;
    p.max_tokens = 10;
    EXPECT_THROW(e.submit(test::random_tokens(30, 1280, 1), p), Error);
    EXPECT_THROW(e.submit({}, p), Error);
    EXPECT_THROW(e.submit({1, 99999}, p), Error);
}

TEST_F(EngineInvariance, CancelMidPrefill) {
    EngineConfig c;
    c.max_num_batched_tokens = 4;
    Engine e(*model_, c);
    SamplingParams p;
    p.max_tokens = 5;
    auto s = e.submit(test::random_tokens(40, 1280, 2), p);
    e.step();
    e.cancel(s->id());
    e.run_until_idle();
    EXPECT_EQ(drain(*s).finish, FinishReason::kAbort);
    EXPECT_EQ(e.cache().blocks().n_free(), e.cache().blocks().n_total());
    EXPECT_EQ(e.cache().slots().n_free(), e.cache().slots().n_total());
}

TEST_F(EngineInvariance, SteadyStateDecodeStepAllocatesNothing) {
    EngineConfig c;
    c.threads = 2;
    Engine e(*model_, c);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 40;
    p.ignore_eos = true;
    auto s = e.submit(test::random_tokens(8, 1280, 3), p);
    for (int i = 0; i < 10; ++i) e.step();   // prefill + warm-up decode steps
    for (int i = 0; i < 20; ++i) {
        e.step();
        EXPECT_EQ(e.last_step().heap_allocations, 0) << "decode step " << i;
        EXPECT_EQ(e.last_step().attn_output_copies, 0);
    }
}

}  // namespace
}  // namespace kimi
