// Speculative decoding through the engine (ngram proposer): greedy and seeded output, tokens and
// log-probabilities, are bit-identical to plain decoding, alone and beside other speculating
// requests, with a token budget that cuts drafts, under preemption and with prefix-cache hits;
// on Kimi Linear and Kimi-K3 configs. Verification must both accept and reject drafts here,
// so rollback of the KDA state to a partial acceptance is exercised every run (a wrong state
// would change every later logit).
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace kimi {
namespace {

using test::expect_same;
using test::Out;

class Speculative : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override { model = KimiModel::load(test::make_model(GetParam(), {}, 21)); }
    std::unique_ptr<KimiModel> model;

    static SamplingParams params(bool greedy, int32_t max_tokens = 40, uint64_t seed = 5) {
        SamplingParams p;
        p.max_tokens = max_tokens;
        p.ignore_eos = true;
        p.logprobs = 2;
        // Three tokens favoured far above the rest: the output is a string over three letters,
        // whose n-grams recur, so drafts are proposed often and both accepted and rejected (the
        // model still decides among the three).
        p.logit_bias = {{3, 40.0f}, {17, 40.0f}, {29, 40.0f}};
        if (!greedy) {
            p.temperature = 0.8f;
            p.seed = seed;
        } else {
            p.temperature = 0;
        }
        return p;
    }
    // A prompt that repeats itself, so prompt lookup proposes from the start.
    std::vector<int32_t> prompt(uint64_t seed) const {
        const auto unit = test::random_tokens(7, model->config().vocab_size, seed);
        std::vector<int32_t> p;
        for (int i = 0; i < 4; ++i) p.insert(p.end(), unit.begin(), unit.end());
        return p;
    }
    static EngineConfig config(bool speculate) {
        EngineConfig c;
        c.threads = 2;
        c.max_num_seqs = 8;
        if (speculate)
            c.speculative = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4,
                                                                     "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
        return c;
    }
    // Every request of `prompts` at once (seeded ones every other, request i with seed 5 + i),
    // run to the end.
    std::vector<Out> run(const EngineConfig& c, const std::vector<std::vector<int32_t>>& prompts,
                         SpecDecodeStats* stats = nullptr, int64_t* preemptions = nullptr) {
        Engine e(*model, c);
        std::vector<std::shared_ptr<RequestStream>> s;
        for (size_t i = 0; i < prompts.size(); ++i) s.push_back(e.submit(prompts[i], params(i % 2 == 0, 40, 5 + i)));
        e.run_until_idle();
        std::vector<Out> out;
        int64_t n_tokens = 0;
        for (auto& x : s) {
            out.push_back(test::drain(*x));
            n_tokens += int64_t(out.back().tokens.size());
        }
        const EngineSnapshot snap = e.snapshot();
        EXPECT_EQ(snap.generated_tokens, n_tokens) << "a rejected draft token is not a generated one";
        EXPECT_EQ(snap.spec.drafts, e.spec_decode_stats().drafts);
        EXPECT_EQ(snap.spec.accepted_tokens, e.spec_decode_stats().accepted_tokens);
        EXPECT_EQ(e.cache().blocks().n_free(), e.cache().blocks().n_total());
        EXPECT_EQ(e.cache().slots().n_free(), e.cache().slots().n_total());
        if (stats) *stats = e.spec_decode_stats();
        if (preemptions) *preemptions = e.total_preemptions();
        return out;
    }
};

// Beside others, the first prompt runs a second time (seeded 7 where the first copy has 5: a
// request's n choices, seeded seed + k), so copies of one prompt share the prefix cache and the
// batch; each request's output equals plain decoding's and its own output alone.
TEST_P(Speculative, BitIdenticalToPlainDecoding) {
    std::vector<std::vector<int32_t>> prompts;
    for (uint64_t i = 0; i < 6; ++i) prompts.push_back(prompt(40 + i));
    const std::vector<std::vector<int32_t>> pair = {prompts[0], prompts[1]};
    std::vector<std::vector<int32_t>> beside = {prompts[0], prompts[1], prompts[0]};
    beside.insert(beside.end(), prompts.begin() + 2, prompts.end());
    for (int variant = 0; variant < 4; ++variant) {
        std::vector<Out> got_alone;
        for (const bool alone : {true, false}) {
            const std::vector<std::vector<int32_t>>& which = alone ? pair : beside;
            EngineConfig plain = config(false), spec = config(true);
            const char* what = "default";
            if (variant == 1) {   // drafts cut by the budget
                plain.max_num_batched_tokens = spec.max_num_batched_tokens = 6;
                what = "token budget 6";
            } else if (variant == 2) {   // preemption: a small cache (the pair alone needs 10 blocks)
                plain.max_model_len = spec.max_model_len = 128;
                plain.n_blocks = spec.n_blocks = 8;
                what = "small cache";
            } else if (variant == 3) {   // one sequence speculates per step: 4 spare slots, not 32
                spec.speculative_max_seqs = 1;
                EXPECT_EQ(Speculator::n_slots(spec), 4);
                EXPECT_EQ(Speculator::n_slots(config(true)), 8 * 4);
                what = "one speculating sequence per step";
            }
            const std::string w = std::string(what) + (alone ? ", alone" : ", beside others");
            SpecDecodeStats st;
            int64_t preempted = 0;
            const std::vector<Out> ref = run(plain, which), got = run(spec, which, &st, &preempted);
            for (size_t i = 0; i < which.size(); ++i) expect_same(got[i], ref[i], w + ", request " + std::to_string(i));
            if (alone) got_alone = got;
            for (size_t i = 0; i < 2; ++i)
                expect_same(got[i], got_alone[i], w + ": as alone, request " + std::to_string(i));
            EXPECT_GT(st.drafts, 0) << w;
            EXPECT_GT(st.accepted_tokens, 0) << w << ": some drafts must be accepted";
            EXPECT_LT(st.accepted_tokens, st.draft_tokens) << w << ": and some rejected";
            if (variant == 2) {
                EXPECT_GT(preempted, 0) << w << ": the small cache must preempt";
            }
        }
    }
}

TEST_P(Speculative, PrefixCacheHitsStayExact) {
    const auto p = prompt(77);
    const Out ref = run(config(false), {p})[0];
    Engine e(*model, config(true));
    for (int round = 0; round < 3; ++round) {   // the later rounds start from the prefix cache
        auto s = e.submit(p, params(true));
        e.run_until_idle();
        const Out o = test::drain(*s);
        expect_same(o, ref, "round " + std::to_string(round));
        if (round > 0) {
            EXPECT_GT(o.cached_tokens, 0);
        }
    }
}

// bench model's verification rows (EngineConfig::speculative_full_drafts): every decode step of
// every sequence verifies a full draft of k tokens, padded where prompt lookup finds fewer, with
// no back-off after rejections; the output is still plain decoding's.
TEST_P(Speculative, FullDraftsVerifyKEveryStepAndStayExact) {
    std::vector<std::vector<int32_t>> prompts = {prompt(90), test::random_tokens(9, model->config().vocab_size, 91)};
    const std::vector<Out> ref = run(config(false), prompts);
    EngineConfig c = config(true);
    c.speculative_full_drafts = true;
    Engine e(*model, c);
    std::vector<std::shared_ptr<RequestStream>> s;
    for (size_t i = 0; i < prompts.size(); ++i)
        s.push_back(e.submit(prompts[i], params(i % 2 == 0, 40, 5 + i)));   // as run()
    int64_t full_steps = 0, short_steps = 0;
    while (e.step()) {
        const EngineStepStats& st = e.last_step();
        if (st.n_prefill_tokens > 0) continue;
        ++(st.n_tokens == st.n_decode_seqs * (1 + 4) ? full_steps : short_steps);
    }
    EXPECT_GT(full_steps, 3);
    // a draft stops short only where max_tokens leaves less room: the last 4 tokens of each reply
    EXPECT_LE(short_steps, 2 * 4);
    const SpecDecodeStats& sd = e.spec_decode_stats();
    EXPECT_LT(sd.accepted_tokens, sd.draft_tokens) << "padded drafts are rejected at times";
    for (size_t i = 0; i < prompts.size(); ++i) {
        const Out o = test::drain(*s[i]);
        expect_same(o, ref[i], "full drafts, request " + std::to_string(i));
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, Speculative, ::testing::Values("tiny", "k3-tiny"));

}   // namespace
}   // namespace kimi
