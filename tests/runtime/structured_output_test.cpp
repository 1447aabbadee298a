// Structured output in the sampler and the engine: the mask (refused tokens never drawn,
// logprobs of the masked distribution, top-N only among allowed tokens), the unmasked-first
// fast path against the masked distribution (frequencies, chi-square), and through the
// engine on the tiny model with its tokenizer: every finished output is a sentence of the
// grammar for every sampling mode, the same alone and batched with free and constrained
// requests, a complete grammar ends the request even with ignore_eos.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "engine_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/structured_output.h"

namespace kimi {
namespace {

using test::drain;
using test::expect_same;
using test::Out;

std::vector<uint64_t> mask_of(const std::vector<bool>& allowed) {
    std::vector<uint64_t> m((allowed.size() + 63) / 64, 0);
    for (size_t t = 0; t < allowed.size(); ++t)
        if (allowed[t]) m[t >> 6] |= uint64_t(1) << (t & 63);
    return m;
}

TEST(SamplerMask, RefusedTokensAreNeverDrawnAndLogprobsAreMasked) {
    const int64_t vocab = 300;
    Rng rng(5);
    std::vector<float> logits(vocab);
    for (float& x : logits) x = float(rng.uniform() * 8.0 - 4.0);
    std::vector<bool> allowed(vocab);
    for (int64_t t = 0; t < vocab; ++t) allowed[size_t(t)] = rng.uniform() < 0.2;
    const std::vector<uint64_t> mask = mask_of(allowed);
    double lse = 0.0, mx = -1e30;
    int32_t best = -1;
    for (int64_t t = 0; t < vocab; ++t)
        if (allowed[size_t(t)] && logits[size_t(t)] > mx) mx = logits[size_t(t)], best = int32_t(t);
    for (int64_t t = 0; t < vocab; ++t)
        if (allowed[size_t(t)]) lse += std::exp(double(logits[size_t(t)]) - mx);
    lse = mx + std::log(lse);

    Sampler s(vocab);
    SamplingParams p;
    p.temperature = 0.0f;
    p.logprobs = 5;
    SampledToken out;
    s.sample(logits, p, {}, {}, 1, 0, out, mask);
    EXPECT_EQ(out.token, best);
    EXPECT_NEAR(out.logprob, double(logits[size_t(best)]) - lse, 1e-5);
    ASSERT_EQ(out.top.size(), 5u);
    for (const auto& [id, lp] : out.top) {
        EXPECT_TRUE(allowed[size_t(id)]) << id;
        EXPECT_NEAR(lp, double(logits[size_t(id)]) - lse, 1e-5);
    }
    const std::vector<std::pair<const char*, SamplingParams>> modes = [] {
        std::vector<std::pair<const char*, SamplingParams>> m;
        SamplingParams t;
        m.push_back({"temperature", t});
        t.top_k = 3;
        m.push_back({"top-k", t});
        t.top_k = 0, t.top_p = 0.5f;
        m.push_back({"top-p", t});
        t.top_p = 1.0f, t.min_p = 0.3f;
        m.push_back({"min-p", t});
        t.min_p = 0.0f, t.repetition_penalty = 1.3f, t.logit_bias = {{0, 50.0f}};
        m.push_back({"penalties + bias", t});
        return m;
    }();
    const std::vector<int32_t> prompt = {1, 2, 3}, output = {4};
    for (const auto& [name, mp] : modes)
        for (uint64_t seed = 0; seed < 300; ++seed) {
            s.sample(logits, mp, prompt, output, seed, 0, out, mask);
            ASSERT_TRUE(allowed[size_t(out.token)]) << name << " seed " << seed;
        }
}

// The engine's fast path — draw without the mask, keep an allowed token, else draw again
// with the mask (attempt 1) — has the masked distribution.
TEST(SamplerMask, UnmaskedFirstHasTheMaskedDistribution) {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.0f, -1.0f, 0.0f};
    const std::vector<bool> allowed = {true, false, true, false, true, true};
    const std::vector<uint64_t> mask = mask_of(allowed);
    Sampler s(int64_t(logits.size()));
    SamplingParams p;
    p.temperature = 0.8f;
    ASSERT_TRUE(Sampler::mask_can_wait(p));
    const int n = 40000;
    std::vector<int> count(logits.size(), 0);
    SampledToken out;
    for (int i = 0; i < n; ++i) {
        s.sample(logits, p, {}, {}, uint64_t(i), 3, out);
        if (!allowed[size_t(out.token)]) s.sample(logits, p, {}, {}, uint64_t(i), 3, out, mask, 1);
        ASSERT_TRUE(allowed[size_t(out.token)]);
        ++count[size_t(out.token)];
    }
    double z = 0.0;
    for (size_t t = 0; t < logits.size(); ++t)
        if (allowed[t]) z += std::exp(double(logits[t]) / 0.8);
    double chi2 = 0.0;
    for (size_t t = 0; t < logits.size(); ++t) {
        if (!allowed[t]) continue;
        const double expect = n * std::exp(double(logits[t]) / 0.8) / z;
        chi2 += (count[t] - expect) * (count[t] - expect) / expect;
    }
    EXPECT_LT(chi2, 16.3) << "chi-square with 3 degrees of freedom (p = 0.001)";
    SamplingParams q = p;
    q.top_p = 0.9f;
    EXPECT_FALSE(Sampler::mask_can_wait(q));
    q = p;
    q.logprobs = 0;
    EXPECT_FALSE(Sampler::mask_can_wait(q));
}

class EngineStructured : public test::TinyWithTokenizer {
protected:
    static std::shared_ptr<const StructuredOutput> schema(const char* text) {
        return std::make_shared<StructuredOutput>(grammar::json_schema_grammar(nlohmann::ordered_json::parse(text)));
    }
    // The request alone, or after `others` (submitted first, so they share its steps).
    Out run(const SamplingParams& p, const std::vector<SamplingParams>& others = {}) {
        EngineConfig c;
        c.threads = 2;
        c.max_num_batched_tokens = 9;
        Engine e(*model_, c, tok_);
        for (size_t i = 0; i < others.size(); ++i)
            e.submit(test::random_tokens(4 + int64_t(i), 1024, 70 + i), others[i]);
        auto s = e.submit(tok_->encode("Give me JSON:"), p);
        e.run_until_idle();
        return drain(*s);
    }
    static bool sentence(const grammar::Grammar& g, const std::string& text) {
        grammar::Matcher m(g);
        return m.accept(text) && m.can_end();
    }
};

constexpr const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":6},
    "n":{"type":"integer","minimum":-3,"maximum":40},
    "tags":{"type":"array","items":{"enum":["x","yy",null]},"maxItems":3},
    "ok":{"type":"boolean"}},"required":["name","n"],"additionalProperties":false})";

TEST_F(EngineStructured, EveryModeWritesASentence) {
    const auto so = schema(kSchema);
    std::vector<std::pair<std::string, SamplingParams>> modes;
    SamplingParams p;
    p.max_tokens = 200;
    p.structured = so;
    p.temperature = 0.0f;
    modes.push_back({"greedy", p});
    p.temperature = 1.0f;
    modes.push_back({"temperature", p});
    p.top_p = 0.8f, p.top_k = 50;
    modes.push_back({"top-p top-k", p});
    p.top_p = 1.0f, p.top_k = 0, p.logprobs = 3;
    modes.push_back({"logprobs", p});
    p.logprobs = -1, p.repetition_penalty = 1.2f, p.presence_penalty = 0.5f;
    modes.push_back({"penalties", p});
    p.ignore_eos = true;
    modes.push_back({"ignore_eos", p});
    int finished = 0;
    for (auto& [name, mp] : modes)
        for (uint64_t seed = 1; seed <= 4; ++seed) {
            mp.seed = seed;
            const Out o = run(mp);
            if (o.finish == FinishReason::kLength) continue;
            ++finished;
            EXPECT_EQ(o.finish, FinishReason::kStop) << name;
            EXPECT_TRUE(sentence(so->grammar(), o.text)) << name << " seed " << seed << ": " << o.text;
            EXPECT_EQ(o.text.front(), '{') << name;
        }
    EXPECT_GE(finished, 20) << "most replies should end within max_tokens";
}

TEST_F(EngineStructured, SameAloneAndBatched) {
    const auto so = schema(kSchema);
    SamplingParams free;
    free.max_tokens = 30;
    free.ignore_eos = true;
    SamplingParams other = free;
    other.structured = schema(R"({"type":"array","items":{"type":"integer"}})");
    other.max_tokens = 40;
    for (const bool greedy : {true, false}) {
        SamplingParams p;
        p.max_tokens = 120;
        p.structured = so;
        p.seed = 9;
        p.temperature = greedy ? 0.0f : 1.0f;
        p.logprobs = greedy ? -1 : 2;
        const Out alone = run(p);
        expect_same(alone, run(p, {free, other, free}), greedy ? "greedy, batched" : "sampled, batched");
        expect_same(alone, run(p, {other, other}), greedy ? "greedy, with constrained" : "sampled, with constrained");
    }
}

// Speculative decoding under a grammar: each verified row samples through the grammar, so the
// output equals plain decoding's (tokens, logprobs) in every sampling mode; an array of digits
// repeats its n-grams, so drafts are proposed, accepted and rejected.
TEST_F(EngineStructured, SpeculationKeepsTheOutputExact) {
    const auto so =
        schema(R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":25,"maxItems":40})");
    const auto run_with = [&](const SamplingParams& p, bool speculate, SpecDecodeStats* st) {
        EngineConfig c;
        c.threads = 2;
        if (speculate)
            c.speculative = parse_speculative_config(
                R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 2})");
        Engine e(*model_, c, tok_);
        auto s = e.submit(tok_->encode("Digits: [1,2,1,2,1,2"), p);
        e.run_until_idle();
        if (st) *st = e.spec_decode_stats();
        return drain(*s);
    };
    SpecDecodeStats total;
    for (const float temperature : {0.0f, 1.0f})
        for (const float penalty : {1.0f, 1.3f})
            for (uint64_t seed = 1; seed <= 3; ++seed) {
                SamplingParams p;
                p.max_tokens = 60;
                p.structured = so;
                p.temperature = temperature;
                p.repetition_penalty = penalty;
                p.logprobs = 2;
                p.seed = seed;
                for (const char* digit : {"1", "2"})   // two digits favoured: the n-grams recur
                    for (int32_t id : tok_->encode(digit)) p.logit_bias.push_back({id, 12.0f});
                SpecDecodeStats st;
                const Out ref = run_with(p, false, nullptr), got = run_with(p, true, &st);
                test::expect_same(got, ref,
                                  "temperature " + std::to_string(temperature) + ", penalty " +
                                      std::to_string(penalty) + ", seed " + std::to_string(seed));
                total.drafts += st.drafts;
                total.accepted_tokens += st.accepted_tokens;
                total.draft_tokens += st.draft_tokens;
            }
    EXPECT_GT(total.drafts, 0);
    EXPECT_GT(total.accepted_tokens, 0);
    EXPECT_LT(total.accepted_tokens, total.draft_tokens);
}

// A draft model under a grammar: its proposals are drawn under the request's grammar (advanced
// through the draft), so the target as its own draft has every proposal accepted, greedy and
// seeded (p = q under the same mask); greedy output equals plain decoding's.
TEST_F(EngineStructured, DraftModelProposalsFollowTheGrammar) {
    const auto so = schema(R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":99},"minItems":8})");
    for (const float temperature : {0.0f, 1.0f}) {
        SamplingParams p;
        p.max_tokens = 40;
        p.structured = so;
        p.temperature = temperature;
        p.logprobs = 1;
        p.seed = 4;
        SpecDecodeStats st;
        Out got, ref;
        for (const bool speculate : {false, true}) {
            EngineConfig c;
            c.threads = 2;
            if (speculate) {
                c.speculative = parse_speculative_config(
                    R"({"method": "draft_model", "model": "self", "num_speculative_tokens": 3})");
                c.draft_model = model_;
            }
            Engine e(*model_, c, tok_);
            auto s = e.submit(tok_->encode("Numbers: "), p);
            e.run_until_idle();
            (speculate ? got : ref) = drain(*s);
            if (speculate) st = e.spec_decode_stats();
        }
        if (temperature == 0.0f) test::expect_same(got, ref, "greedy under the grammar");
        EXPECT_EQ(got.text.rfind('[', 0), 0u) << got.text;
        EXPECT_GT(st.drafts, 0);
        EXPECT_EQ(st.accepted_tokens, st.draft_tokens) << "temperature " << temperature;
    }
}

TEST_F(EngineStructured, ChoiceAndCompleteGrammarEnd) {
    SamplingParams p;
    p.max_tokens = 50;
    p.ignore_eos = true;   // a complete grammar still ends the reply
    p.structured = std::make_shared<StructuredOutput>(grammar::choice_grammar({"alpha", "beta", "gamma delta"}));
    std::map<std::string, int> seen;
    for (uint64_t seed = 0; seed < 12; ++seed) {
        p.seed = seed;
        const Out o = run(p);
        EXPECT_EQ(o.finish, FinishReason::kStop);
        EXPECT_TRUE(o.text == "alpha" || o.text == "beta" || o.text == "gamma delta") << o.text;
        ++seen[o.text];
    }
    EXPECT_GE(seen.size(), 2u);
}

TEST_F(EngineStructured, NeedsATokenizer) {
    Engine e(*model_, EngineConfig{});
    SamplingParams p;
    p.structured = std::make_shared<StructuredOutput>(grammar::choice_grammar({"a"}));
    EXPECT_THROW(e.submit({1, 2, 3}, p), Error);
}

}   // namespace
}   // namespace kimi
