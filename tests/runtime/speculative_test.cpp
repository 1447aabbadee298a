// Speculative decoding's pieces that need no model: --speculative-config as vLLM reads it, and
// the ngram proposer against an independent oracle (vLLM's own algorithm: KMP over the
// reversed tokens), on random token strings over small alphabets where n-grams recur often.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "runtime/ngram_proposer.h"
#include "runtime/speculative_config.h"

namespace kimi {
namespace {

TEST(SpeculativeConfig, NgramDefaultsAsVllm) {
    SpeculativeConfig c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4})");
    EXPECT_EQ(c.method, SpeculativeConfig::Method::kNgram);
    EXPECT_EQ(c.num_speculative_tokens, 4);
    EXPECT_EQ(c.prompt_lookup_min, 5);
    EXPECT_EQ(c.prompt_lookup_max, 5);
    c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3})");
    EXPECT_EQ(c.prompt_lookup_min, 3);
    EXPECT_EQ(c.prompt_lookup_max, 3);
    c = parse_speculative_config(R"({"model": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 2})");
    EXPECT_EQ(c.method, SpeculativeConfig::Method::kNgram);
    EXPECT_EQ(c.prompt_lookup_max, 2);
    EXPECT_EQ(c.describe(), "ngram, k=2, n-grams 2..2");
    c = parse_speculative_config(R"({"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 3})");
    EXPECT_EQ(c.method, SpeculativeConfig::Method::kDraftModel);
    EXPECT_EQ(c.model, "/m/draft");
}

TEST(SpeculativeConfig, RefusalsNameTheKey) {
    const auto refused = [](const char* json, const char* says) {
        try {
            parse_speculative_config(json);
            ADD_FAILURE() << json << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    refused("{", "invalid JSON");
    refused("[1]", "JSON object");
    refused(R"({"method": "ngram"})", "num_speculative_tokens");
    refused(R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens");
    refused(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2})",
            "prompt_lookup_min=4 must be <= prompt_lookup_max=2");
    refused(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0})", "prompt_lookup_min");
    refused(R"({"method": "eagle", "num_speculative_tokens": 2})", "method 'eagle'");
    refused(R"({"method": "draft_model", "num_speculative_tokens": 2})", "needs 'model'");
    refused(
        R"({"method": "dspark", "model": "d", "num_speculative_tokens": 7, "draft_sample_method": "probabilistic"})",
        "docs/runtime.md#dspark");
    refused(R"({"method": "ngram", "num_speculative_tokens": 2, "temperature": 1})", "unknown key 'temperature'");
}

// vLLM's choice, written as it computes it: the longest prefix of the reversed tokens that
// recurs (KMP prefix function, capped at max_n), at its last position in the reversed tokens.
std::vector<int32_t> oracle(const std::vector<int32_t>& x, int32_t min_n, int32_t max_n, int64_t max_model_len,
                            int64_t k) {
    const int64_t t = int64_t(x.size());
    if (t < min_n) return {};
    k = std::min(k, max_model_len - t);
    if (k <= 0) return {};
    const std::vector<int32_t> r(x.rbegin(), x.rend());
    std::vector<int64_t> lps(size_t(max_n), 0);
    int64_t longest = 0, position = 0, prev = 0, i = 1;
    while (i < t) {
        if (r[size_t(prev)] == r[size_t(i)]) {
            ++prev;
            if (prev >= longest) longest = prev, position = i;
            if (i < max_n) lps[size_t(i)] = prev;
            if (prev == max_n) prev = lps[size_t(max_n - 1)];
            ++i;
        } else if (prev != 0) {
            prev = lps[size_t(prev - 1)];
        } else {
            ++i;
        }
    }
    if (longest < min_n) return {};
    const int64_t start = t - 1 - position + longest;
    return std::vector<int32_t>(x.begin() + start, x.begin() + start + std::min(k, t - start));
}

TEST(NgramProposer, EqualsVllmsChoiceOnRandomStrings) {
    std::mt19937 rng(11);
    std::vector<int32_t> draft;
    int64_t proposed = 0;
    for (int trial = 0; trial < 20000; ++trial) {
        const int alphabet = 2 + int(rng() % 4);
        std::vector<int32_t> x(rng() % 48);
        for (auto& v : x) v = int32_t(rng() % uint32_t(alphabet));
        NgramParams p;
        p.min_n = 1 + int32_t(rng() % 4);
        p.max_n = p.min_n + int32_t(rng() % 4);
        p.k = 1 + int32_t(rng() % 6);
        const int64_t max_len = rng() % 4 == 0 ? int64_t(x.size()) + int64_t(rng() % 3) : 1 << 20;
        ngram_propose(x, p, max_len, draft);
        ASSERT_EQ(draft, oracle(x, p.min_n, p.max_n, max_len, p.k)) << "trial " << trial;
        proposed += !draft.empty();
    }
    EXPECT_GT(proposed, 5000) << "the strings should make proposals often";
}

TEST(NgramProposer, Examples) {
    std::vector<int32_t> d;
    const NgramParams p{2, 3, 3};
    ngram_propose(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2}, p, 100, d);   // "1 2" recurs: 3 4 5 follow
    EXPECT_EQ(d, (std::vector<int32_t>{3, 4, 5}));
    ngram_propose(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2}, p, 8, d);   // one token left under max-model-len
    EXPECT_EQ(d, (std::vector<int32_t>{3}));
    ngram_propose(std::vector<int32_t>{9, 1, 2, 7, 1, 2, 8, 1, 2}, p, 100, d);   // the earliest occurrence
    EXPECT_EQ(d, (std::vector<int32_t>{7, 1, 2}));
    ngram_propose(std::vector<int32_t>{1, 2, 3, 9, 2, 3, 5, 1, 2, 3}, p, 100, d);   // the longest wins
    EXPECT_EQ(d, (std::vector<int32_t>{9, 2, 3}));
    ngram_propose(std::vector<int32_t>{1, 2, 3, 4}, p, 100, d);   // nothing recurs
    EXPECT_TRUE(d.empty());
    ngram_propose(std::vector<int32_t>{5, 5, 5, 5}, p, 100, d);   // an occurrence may overlap the suffix
    EXPECT_EQ(d, (std::vector<int32_t>{5}));
}

}   // namespace
}   // namespace kimi
