// Sampler unit tests: greedy and ties, logit bias, repetition / frequency / presence penalties
// (exact formulas via greedy flips), temperature frequencies against a double-precision
// softmax (chi-square), top-k / top-p / min-p kept sets against an independent reference
// (vLLM v1 / OpenAI semantics), seeded determinism and call-order independence, raw logprobs;
// and each stage of sample() on its own (SamplerStages: mask, penalties, filtering and choice,
// logprobs).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <vector>

#include "core/rng.h"
#include "runtime/sampler.h"

namespace kimi {
namespace {

using Ids = std::vector<int32_t>;

int32_t sample_once(Sampler& s, const std::vector<float>& logits, const SamplingParams& p, const Ids& prompt = {},
                    const Ids& output = {}, uint64_t seed = 1, uint64_t step = 0) {
    SampledToken out;
    s.sample(logits, p, prompt, output, seed, step, out);
    return out.token;
}

int32_t greedy(const std::vector<float>& logits, SamplingParams p = {}, const Ids& prompt = {},
               const Ids& output = {}) {
    Sampler s(int64_t(logits.size()));
    p.temperature = 0.0f;
    return sample_once(s, logits, p, prompt, output);
}

// Asserts that token 0's processed logit is `expected` (within 1e-4): a fresh token 1 just
// below it loses the argmax, one just above wins. Token 1 must not be penalised.
void expect_processed_logit0(float logit0, const SamplingParams& p, const Ids& prompt, const Ids& output,
                             double expected) {
    EXPECT_EQ(greedy({logit0, float(expected - 1e-4)}, p, prompt, output), 0) << "expected " << expected;
    EXPECT_EQ(greedy({logit0, float(expected + 1e-4)}, p, prompt, output), 1) << "expected " << expected;
}

std::vector<double> softmax(const std::vector<float>& logits, double t) {
    const double m = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double s = 0.0;
    for (size_t i = 0; i < p.size(); ++i) s += p[i] = std::exp((double(logits[i]) - m) / t);
    for (double& x : p) x /= s;
    return p;
}

std::vector<double> log_softmax(const std::vector<float>& logits) {
    const double m = *std::max_element(logits.begin(), logits.end());
    double s = 0.0;
    for (const float x : logits) s += std::exp(double(x) - m);
    std::vector<double> lp(logits.size());
    for (size_t i = 0; i < lp.size(); ++i) lp[i] = double(logits[i]) - m - std::log(s);
    return lp;
}

// Independent reference of the filters: normalised probabilities after top-k → top-p →
// min-p (zero outside the kept set), all in double.
std::vector<double> reference_kept(const std::vector<float>& logits, const SamplingParams& p) {
    std::vector<double> prob = softmax(logits, p.temperature);
    Ids ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return prob[size_t(a)] > prob[size_t(b)] || (prob[size_t(a)] == prob[size_t(b)] && a < b);
    });
    size_t n = ids.size();
    if (p.top_k > 0 && size_t(p.top_k) < n) n = size_t(p.top_k);
    double mass = 0.0;
    for (size_t j = 0; j < n; ++j) mass += prob[size_t(ids[j])];
    if (p.top_p < 1.0f) {
        double cum = 0.0;
        for (size_t j = 0; j < n; ++j) {
            cum += prob[size_t(ids[j])] / mass;
            if (cum >= double(p.top_p)) {
                n = j + 1;
                break;
            }
        }
    }
    const double p_max = prob[size_t(ids[0])];
    size_t kept = 1;
    while (kept < n && prob[size_t(ids[kept])] >= double(p.min_p) * p_max) ++kept;
    std::vector<double> out(logits.size(), 0.0);
    double s = 0.0;
    for (size_t j = 0; j < kept; ++j) s += prob[size_t(ids[j])];
    for (size_t j = 0; j < kept; ++j) out[size_t(ids[j])] = prob[size_t(ids[j])] / s;
    return out;
}

// Counts of n draws at steps 0..n-1 with a fixed seed.
std::vector<int64_t> draw_counts(const std::vector<float>& logits, const SamplingParams& p, int64_t n,
                                 uint64_t seed = 1234) {
    Sampler s(int64_t(logits.size()));
    std::vector<int64_t> counts(logits.size(), 0);
    SampledToken out;
    for (int64_t i = 0; i < n; ++i) {
        s.sample(logits, p, {}, {}, seed, uint64_t(i), out);
        ++counts[size_t(out.token)];
    }
    return counts;
}

// Pearson chi-square over the tokens with expected probability > 0; tokens with zero
// expected probability must never be drawn. Bound ≈ a p-value of 1e-5 for its dof.
void expect_matches(const std::vector<int64_t>& counts, const std::vector<double>& prob) {
    const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t(0));
    double chi2 = 0.0;
    int dof = -1;
    for (size_t i = 0; i < prob.size(); ++i) {
        if (prob[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the kept set";
            continue;
        }
        const double e = prob[i] * double(n);
        chi2 += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
        ++dof;
    }
    if (dof > 0) {
        EXPECT_LT(chi2, dof + 6.0 * std::sqrt(2.0 * dof) + 4.0) << "dof " << dof;
    }
}

std::vector<float> random_logits(int64_t vocab, uint64_t seed, double lo, double hi) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(vocab));
    for (float& x : v) x = float(rng.uniform(lo, hi));
    return v;
}

// ---------------------------------------------------------------- greedy and bias

TEST(SamplerTest, GreedyPicksArgmax) {
    EXPECT_EQ(greedy({0.1f, -2.0f, 3.5f, 3.4f, 1.0f}), 2);
    EXPECT_EQ(greedy({-5.0f, -4.0f, -6.0f}), 1);
    const std::vector<float> big = random_logits(163840, 7, -10.0, 10.0);
    const auto it = std::max_element(big.begin(), big.end());
    EXPECT_EQ(greedy(big), int32_t(it - big.begin()));
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
    EXPECT_EQ(greedy({1.0f, 2.0f, 0.5f, 2.0f, 2.0f}), 1);
    EXPECT_EQ(greedy({7.0f, 7.0f}), 0);
    const float ninf = -std::numeric_limits<float>::infinity();
    EXPECT_EQ(greedy({ninf, ninf, 0.0f, ninf}), 2);
    SamplingParams p;
    p.temperature = -1.0f;   // ≤ 0 is greedy too
    EXPECT_EQ(greedy({0.0f, 1.0f, 1.0f}, p), 1);
}

TEST(SamplerTest, LogitBiasChangesThePick) {
    SamplingParams p;
    EXPECT_EQ(greedy({1.0f, 2.0f, 0.0f}, p), 1);
    p.logit_bias = {{0, 1.5f}};
    EXPECT_EQ(greedy({1.0f, 2.0f, 0.0f}, p), 0);
    p.logit_bias = {{1, -100.0f}, {2, 0.9f}};
    EXPECT_EQ(greedy({1.0f, 2.0f, 0.0f}, p), 0);   // 1, −98, 0.9
    p.logit_bias = {{2, 1.01f}};
    EXPECT_EQ(greedy({1.0f, 2.0f, 1.0f}, p), 2);           // ties broken after the bias: 1, 2, 2.01
    p.logit_bias = {{-1, 50.0f}, {3, 50.0f}, {2, 0.5f}};   // out-of-range ids are ignored
    EXPECT_EQ(greedy({1.0f, 2.0f, 0.0f}, p), 1);
    SamplingParams q;
    q.logit_bias = {{0, 0.25f}};
    expect_processed_logit0(1.0f, q, {}, {}, 1.25);
}

// ---------------------------------------------------------------- penalties

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    expect_processed_logit0(3.0f, p, {0}, {}, 1.5);     // prompt: 3 / 2
    expect_processed_logit0(3.0f, p, {}, {0}, 1.5);     // output too
    expect_processed_logit0(-1.0f, p, {0}, {}, -2.0);   // negative: −1 · 2
    expect_processed_logit0(0.0f, p, {0}, {}, 0.0);
    p.repetition_penalty = 0.5f;   // r < 1 boosts
    expect_processed_logit0(3.0f, p, {0}, {}, 6.0);
    expect_processed_logit0(-3.0f, p, {0}, {}, -1.5);
    // Applied once per token however often it occurs, in prompt and output together.
    p.repetition_penalty = 1.25f;
    expect_processed_logit0(4.0f, p, {0, 0, 0}, {0, 0}, 3.2);
    expect_processed_logit0(-4.0f, p, {0, 5, 0}, {0}, -5.0);   // ids beyond the vocab are ignored
}

TEST(SamplerTest, RepetitionPenaltyFlipsGreedyAtTheFormulaThreshold) {
    SamplingParams p;
    p.repetition_penalty = 1.5f;   // 1.0 / 1.5 = 0.667 > 0.6: no flip
    EXPECT_EQ(greedy({1.0f, 0.6f}, p, {0}), 0);
    p.repetition_penalty = 2.0f;   // 0.5 < 0.6: flip
    EXPECT_EQ(greedy({1.0f, 0.6f}, p, {0}), 1);
    p.repetition_penalty = 1.4f;   // negative logits are multiplied: −1.4 > −1.5, no flip
    EXPECT_EQ(greedy({-1.0f, -1.5f}, p, {0}), 0);
    p.repetition_penalty = 1.6f;   // −1.6 < −1.5: flip (dividing would give −0.625: no flip)
    EXPECT_EQ(greedy({-1.0f, -1.5f}, p, {0}), 1);
    p.repetition_penalty = 1.4f;   // three occurrences still penalise once (1.4³ would flip)
    EXPECT_EQ(greedy({-1.0f, -1.5f}, p, {0, 0, 0}, {0}), 0);
}

TEST(SamplerTest, FrequencyAndPresencePenaltiesUseOutputCounts) {
    SamplingParams p;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    expect_processed_logit0(5.0f, p, {}, {0, 2, 0, 0}, 5.0 - 0.5 * 3 - 0.25);
    expect_processed_logit0(5.0f, p, {}, {3, 0}, 5.0 - 0.5 - 0.25);
    expect_processed_logit0(5.0f, p, {0, 0, 0}, {}, 5.0);   // the prompt does not count
    p.frequency_penalty = -1.0f;                            // negative values encourage
    p.presence_penalty = 0.0f;
    expect_processed_logit0(1.0f, p, {}, {0, 0}, 3.0);
    // Greedy flip: 2 − 0.3·2 − 0.5 = 0.9 < 1.0.
    SamplingParams q;
    q.frequency_penalty = 0.3f;
    EXPECT_EQ(greedy({2.0f, 1.0f}, q, {}, {0}), 0);   // 1.7
    q.presence_penalty = 0.5f;
    EXPECT_EQ(greedy({2.0f, 1.0f}, q, {}, {0, 0}), 1);   // 0.9
}

TEST(SamplerTest, PenaltiesApplyInOrderBiasRepetitionFrequency) {
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    expect_processed_logit0(3.0f, p, {}, {0, 0}, 3.0 / 2 - 1.0);   // not (3 − 1) / 2
    p.logit_bias = {{0, 1.0f}};
    expect_processed_logit0(3.0f, p, {}, {0, 0}, (3.0 + 1.0) / 2 - 1.0);   // bias first
    p.logit_bias = {{0, -5.0f}};
    expect_processed_logit0(3.0f, p, {0}, {0, 0}, (3.0 - 5.0) * 2 - 1.0);   // sign after the bias
}

TEST(SamplerTest, PenaltyScratchIsResetBetweenCalls) {
    Sampler s(3);
    SamplingParams p;
    p.temperature = 0.0f;
    p.frequency_penalty = 10.0f;
    p.repetition_penalty = 3.0f;
    EXPECT_EQ(sample_once(s, {2.0f, 1.0f, 0.0f}, p, {0}, {0, 0}), 1);
    EXPECT_EQ(sample_once(s, {2.0f, 1.0f, 0.0f}, p, {}, {}), 0);   // nothing left behind
    EXPECT_EQ(sample_once(s, {2.0f, 1.0f, 0.0f}, p, {}, {1}), 0);
    EXPECT_EQ(sample_once(s, {2.0f, 1.0f, 0.0f}, p, {}, {0}), 1);   // counted once, not thrice
    p.frequency_penalty = 0.0f;
    EXPECT_EQ(sample_once(s, {2.0f, 1.0f, 0.0f}, p, {}, {}), 0);
}

// ---------------------------------------------------------------- temperature and filters

TEST(SamplerTest, TemperatureFrequenciesMatchSoftmax) {
    const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f};
    for (const float t : {0.8f, 1.0f, 1.7f}) {
        SamplingParams p;
        p.temperature = t;
        SCOPED_TRACE(t);
        expect_matches(draw_counts(logits, p, 20000), softmax(logits, t));
    }
}

TEST(SamplerTest, TemperatureIsAppliedToProcessedLogits) {
    // Bias + penalties change the distribution the draw follows.
    const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f};
    SamplingParams p;
    p.temperature = 0.9f;
    p.logit_bias = {{2, 1.0f}};
    p.presence_penalty = 0.4f;
    Sampler s(4);
    std::vector<int64_t> counts(4, 0);
    SampledToken out;
    for (uint64_t i = 0; i < 20000; ++i) {
        s.sample(logits, p, {}, Ids{3}, 99, i, out);
        ++counts[size_t(out.token)];
    }
    expect_matches(counts, softmax({1.0f, 0.5f, 0.7f, 1.6f}, 0.9));
}

TEST(SamplerTest, TopK1IsGreedy) {
    const std::vector<float> logits = random_logits(1000, 3, -4.0, 4.0);
    const int32_t best = greedy(logits);
    SamplingParams p;
    p.temperature = 1.5f;
    p.top_k = 1;
    Sampler s(1000);
    for (uint64_t step = 0; step < 200; ++step) EXPECT_EQ(sample_once(s, logits, p, {}, {}, step * 7 + 1, step), best);
}

TEST(SamplerTest, TopKKeepsTheKLargestTiesToLowerId) {
    SamplingParams p;
    p.top_k = 2;
    const std::vector<float> logits = {3.0f, 1.0f, 1.0f, 1.0f, 0.0f};
    expect_matches(draw_counts(logits, p, 8000), reference_kept(logits, p));
    const auto c = draw_counts(logits, p, 8000);
    EXPECT_GT(c[1], 0);
    EXPECT_EQ(c[2] + c[3] + c[4], 0);
    p.top_k = 3;
    p.temperature = 0.7f;
    const std::vector<float> l2 = {0.0f, 2.0f, -1.0f, 1.5f, 1.0f, 0.9f};
    expect_matches(draw_counts(l2, p, 20000), reference_kept(l2, p));
}

TEST(SamplerTest, TopKLargeAndOffValues) {
    const std::vector<float> logits = random_logits(5000, 11, -3.0, 3.0);
    SamplingParams p;
    p.top_k = 2000;   // above the partial-sort size: nth_element path
    const std::vector<double> kept = reference_kept(logits, p);
    const auto c = draw_counts(logits, p, 1500);
    for (size_t i = 0; i < c.size(); ++i)
        if (kept[i] == 0.0) {
            EXPECT_EQ(c[i], 0) << i;
        }
    // k ≥ vocab and k ≤ 0 are off: the same draws as no top-k.
    Sampler s(5000);
    for (uint64_t step = 0; step < 100; ++step) {
        SamplingParams off;
        const int32_t ref = sample_once(s, logits, off, {}, {}, 5, step);
        off.top_k = 5000;
        EXPECT_EQ(sample_once(s, logits, off, {}, {}, 5, step), ref);
        off.top_k = -1;
        EXPECT_EQ(sample_once(s, logits, off, {}, {}, 5, step), ref);
        off.top_k = 0;
        off.top_p = 1.0f;
        off.min_p = 0.0f;
        EXPECT_EQ(sample_once(s, logits, off, {}, {}, 5, step), ref);
    }
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefix) {
    // p = 0.05, 0.5, 0.1, 0.2, 0.15 (ids shuffled): top_p 0.8 keeps 0.5 + 0.2 + 0.15 = 0.85.
    const std::vector<float> logits = {std::log(0.05f), std::log(0.5f), std::log(0.1f), std::log(0.2f),
                                       std::log(0.15f)};
    SamplingParams p;
    p.top_p = 0.8f;
    const std::vector<double> kept = reference_kept(logits, p);
    EXPECT_EQ(kept[0], 0.0);
    EXPECT_EQ(kept[2], 0.0);
    EXPECT_GT(kept[4], 0.0);
    expect_matches(draw_counts(logits, p, 20000), kept);
    p.top_p = 0.6f;   // 0.5 + 0.2
    expect_matches(draw_counts(logits, p, 20000), reference_kept(logits, p));
    p.top_p = 0.01f;   // always at least one token
    const auto c = draw_counts(logits, p, 2000);
    EXPECT_EQ(c[1], 2000);
}

TEST(SamplerTest, TopPSeesTheTopKRenormalisedDistribution) {
    // 0.4, 0.3, 0.2, 0.1 → top_k 2 → 0.571, 0.429 → top_p 0.5 keeps token 0 alone
    // (without the renormalisation it would keep two).
    const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
    SamplingParams p;
    p.top_k = 2;
    p.top_p = 0.5f;
    EXPECT_EQ(draw_counts(logits, p, 2000)[0], 2000);
    p.top_p = 0.6f;   // now both
    expect_matches(draw_counts(logits, p, 20000), reference_kept(logits, p));
}

TEST(SamplerTest, MinPDropsTokensBelowTheScaledMax) {
    // p = 0.5, 0.3, 0.1, 0.06, 0.04; min_p 0.15 → threshold 0.075 keeps three.
    const std::vector<float> logits = {std::log(0.06f), std::log(0.5f), std::log(0.04f), std::log(0.3f),
                                       std::log(0.1f)};
    SamplingParams p;
    p.min_p = 0.15f;
    const std::vector<double> kept = reference_kept(logits, p);
    EXPECT_EQ(kept[0], 0.0);
    EXPECT_GT(kept[4], 0.0);
    expect_matches(draw_counts(logits, p, 20000), kept);
    p.min_p = 1.0f;   // only the max
    EXPECT_EQ(draw_counts(logits, p, 1000)[1], 1000);
    // Combined: top_p 0.9 keeps 0.5 + 0.3 + 0.1; min_p 0.5 (threshold 0.25) cuts to two.
    p.top_p = 0.9f;
    p.min_p = 0.5f;
    p.temperature = 1.0f;
    const std::vector<double> both = reference_kept(logits, p);
    EXPECT_EQ(both[4], 0.0);
    expect_matches(draw_counts(logits, p, 20000), both);
    p.top_k = 3;
    p.min_p = 0.3f;
    expect_matches(draw_counts(logits, p, 20000), reference_kept(logits, p));
}

// Mass of the kept tokens ranked in the second half (by probability) must match the
// reference: catches a cut that is too early or too late, not just tokens outside.
void expect_large_vocab_filter(const std::vector<float>& logits, const SamplingParams& p, int64_t draws,
                               size_t expect_min_kept, size_t expect_max_kept) {
    const std::vector<double> kept = reference_kept(logits, p);
    Ids ids;
    for (size_t i = 0; i < kept.size(); ++i)
        if (kept[i] > 0.0) ids.push_back(int32_t(i));
    ASSERT_GE(ids.size(), expect_min_kept);
    ASSERT_LE(ids.size(), expect_max_kept);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return kept[size_t(a)] > kept[size_t(b)]; });
    std::vector<uint8_t> low(logits.size(), 0);
    double low_mass = 0.0;
    for (size_t j = ids.size() / 2; j < ids.size(); ++j) {
        low[size_t(ids[j])] = 1;
        low_mass += kept[size_t(ids[j])];
    }
    const auto c = draw_counts(logits, p, draws, 77);
    int64_t low_draws = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        if (kept[i] == 0.0) {
            EXPECT_EQ(c[i], 0) << "token " << i << " is outside the kept set";
        }
        if (low[i]) low_draws += c[i];
    }
    const double sigma = std::sqrt(double(draws) * low_mass * (1.0 - low_mass));
    EXPECT_NEAR(double(low_draws), double(draws) * low_mass, 5.0 * sigma + 1.0);
}

// A few high logits over a wide flat tail in [−2, 0].
std::vector<float> head_and_tail(int64_t vocab, double head_logit) {
    std::vector<float> logits = random_logits(vocab, 21, -2.0, 0.0);
    Rng rng(5);
    for (int i = 0; i < 20; ++i) logits[size_t(rng.below(uint64_t(vocab)))] = float(head_logit + rng.uniform());
    return logits;
}

TEST(SamplerTest, TopPAndMinPAtFullVocab) {
    const int64_t vocab = 163840;
    const std::vector<float> logits = head_and_tail(vocab, 10.0);   // the head holds ~0.86 of the mass
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = 0.8f;   // the nucleus is a part of the head
    expect_large_vocab_filter(logits, p, 600, 5, 20);
    p.top_p = 0.95f;   // reaches into the flat tail
    expect_large_vocab_filter(logits, p, 600, 1000, size_t(vocab));
}

TEST(SamplerTest, TopPAndMinPWithManyCandidates) {
    const int64_t vocab = 20000;
    const std::vector<float> logits = head_and_tail(vocab, 6.0);   // the head holds ~0.6 of the mass
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = 0.5f;
    expect_large_vocab_filter(logits, p, 1000, 5, 20);
    p.top_p = 0.8f;
    expect_large_vocab_filter(logits, p, 1000, 1000, size_t(vocab));
    p.top_p = 1.0f;
    p.min_p = 0.3f;
    expect_large_vocab_filter(logits, p, 1000, 3, 20);
    p.temperature = 3.0f;   // the tail at 0.06–0.11 of the max: min_p 0.08 splits it
    p.min_p = 0.08f;
    expect_large_vocab_filter(logits, p, 1000, 1000, size_t(vocab) - 1000);
    p.top_p = 0.7f;   // top-p and min-p together
    expect_large_vocab_filter(logits, p, 1000, 1000, size_t(vocab) - 1000);
    p.top_k = 3000;   // all three
    expect_large_vocab_filter(logits, p, 1000, 100, 3000);
    const std::vector<float> flat = random_logits(vocab, 8, -5.0, 5.0);
    SamplingParams q;
    q.top_p = 0.5f;
    q.temperature = 0.8f;
    expect_large_vocab_filter(flat, q, 1000, 100, size_t(vocab));
    q.min_p = 0.001f;
    expect_large_vocab_filter(flat, q, 1000, 100, size_t(vocab));
}

TEST(SamplerTest, TopPCutsInsideATiedGroupByLowerId) {
    // 10 tokens tied at logit 8 (≈ 0.058 of the mass each) over a flat tail: top_p 0.3 keeps
    // the 6 of them with the lowest ids (5 reach only 0.29).
    const int64_t vocab = 50000;
    std::vector<float> logits = random_logits(vocab, 31, -2.0, 0.0);
    Ids tied;
    for (int i = 0; i < 10; ++i) tied.push_back(int32_t(40000 - i * 3999));   // ids out of order of i
    for (const int32_t id : tied) logits[size_t(id)] = 8.0f;
    std::sort(tied.begin(), tied.end());
    SamplingParams p;
    p.top_p = 0.3f;
    const std::vector<double> kept = reference_kept(logits, p);
    for (size_t j = 0; j < tied.size(); ++j) EXPECT_EQ(kept[size_t(tied[j])] > 0.0, j < 6) << j;
    expect_matches(draw_counts(logits, p, 1500), kept);
    p.min_p = 0.5f;   // min-p keeps the whole group; top-p still cuts it
    expect_matches(draw_counts(logits, p, 1500), kept);
}

TEST(SamplerTest, BucketedFiltersMatchTheSortedWalk) {
    // top-p / min-p alone (bucketed) and after top_k = vocab − 1 (a sorted candidate list) must
    // draw the same token for every (seed, step) when the one token top-k drops has p = 0: both
    // walk the kept tokens in (p desc, id asc) order. Logits on a 1/64 grid with many exact ties.
    const int64_t vocab = 3000;
    Rng rng(17);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& x : logits) x = float(int(rng.below(400))) / 64.0f;
    logits[123] = -1000.0f;
    Sampler a(vocab), b(vocab);
    for (const float t : {0.5f, 1.0f}) {
        for (const auto& [top_p, min_p] : {std::pair{0.3f, 0.0f}, {0.9f, 0.0f}, {1.0f, 0.2f}, {0.95f, 0.05f}}) {
            SamplingParams p;
            p.temperature = t;
            p.top_p = top_p;
            p.min_p = min_p;
            SamplingParams pk = p;
            pk.top_k = int32_t(vocab - 1);
            std::set<int32_t> seen;
            for (uint64_t step = 0; step < 200; ++step) {
                const int32_t tok = sample_once(a, logits, p, {}, {}, 9, step);
                EXPECT_EQ(tok, sample_once(b, logits, pk, {}, {}, 9, step)) << t << " " << top_p << " " << min_p;
                seen.insert(tok);
            }
            EXPECT_GT(seen.size(), 20u);
        }
    }
}

// ---------------------------------------------------------------- determinism

TEST(SamplerTest, SameSeedAndStepGiveTheSameToken) {
    const std::vector<float> logits = random_logits(2000, 4, -1.0, 1.0);
    SamplingParams p;
    p.temperature = 1.0f;
    Sampler a(2000), b(2000);
    for (uint64_t step = 0; step < 50; ++step) {
        const int32_t t = sample_once(a, logits, p, {}, {}, 42, step);
        sample_once(b, random_logits(2000, step, -3.0, 3.0), p, {}, {}, 7, step);   // unrelated call first
        EXPECT_EQ(sample_once(b, logits, p, {}, {}, 42, step), t);
        EXPECT_EQ(sample_once(a, logits, p, {}, {}, 42, step), t);
    }
}

TEST(SamplerTest, DifferentStepsAndSeedsGiveDifferentDraws) {
    const std::vector<float> logits(64, 0.0f);   // uniform over 64 tokens
    SamplingParams p;
    Sampler s(64);
    std::set<int32_t> by_step, by_seed;
    int repeats = 0, prev = -1;
    for (uint64_t i = 0; i < 1000; ++i) {
        const int32_t t = sample_once(s, logits, p, {}, {}, 3, i);
        by_step.insert(t);
        repeats += t == prev;
        prev = t;
        by_seed.insert(sample_once(s, logits, p, {}, {}, i, 5));
    }
    EXPECT_GE(by_step.size(), 60u);
    EXPECT_GE(by_seed.size(), 60u);
    EXPECT_LT(repeats, 50);   // expected ~16
}

// One simulated request: logits depend on (request, step), the output grows by the draws.
struct SimRequest {
    uint64_t id, seed;
    SamplingParams params;
    Ids prompt, output;
    std::vector<float> logprobs;
    std::vector<float> logits_at(uint64_t step) const { return random_logits(3000, id * 1000003 + step, -3.0, 3.0); }
};

void step_request(Sampler& s, SimRequest& r) {
    const uint64_t step = r.output.size();
    SampledToken out;
    out.top.reserve(8);
    s.sample(r.logits_at(step), r.params, r.prompt, r.output, r.seed, step, out);
    r.output.push_back(out.token);
    r.logprobs.push_back(out.logprob);
}

TEST(SamplerTest, CallOrderIndependence) {
    SimRequest a{1, 11, {}, {5, 6, 7, 5}, {}, {}}, b{2, 22, {}, {9, 9, 1}, {}, {}};
    a.params.temperature = 0.9f;
    a.params.top_k = 50;
    a.params.repetition_penalty = 1.3f;
    a.params.frequency_penalty = 0.2f;
    a.params.logprobs = 3;
    b.params.temperature = 1.2f;
    b.params.top_p = 0.8f;
    b.params.presence_penalty = 0.5f;
    b.params.min_p = 0.01f;
    b.params.logit_bias = {{9, 2.0f}};
    SimRequest a_alone = a, b_alone = b;
    Sampler s1(3000), s2(3000), s3(3000);
    for (int i = 0; i < 150; ++i) step_request(s1, a_alone);
    for (int i = 0; i < 150; ++i) step_request(s2, b_alone);
    for (int i = 0; i < 150; ++i) {
        if (i % 3 == 0) {
            step_request(s3, b);
            step_request(s3, a);
        } else {
            step_request(s3, a);
            step_request(s3, b);
        }
    }
    EXPECT_EQ(a.output, a_alone.output);
    EXPECT_EQ(b.output, b_alone.output);
    EXPECT_EQ(a.logprobs, a_alone.logprobs);
    EXPECT_EQ(b.logprobs, b_alone.logprobs);
    EXPECT_NE(a.output, b.output);
}

// ---------------------------------------------------------------- logprobs

TEST(SamplerTest, LogprobsAreRawLogSoftmax) {
    std::vector<float> logits = random_logits(1000, 9, -6.0, 6.0);
    logits[17] = logits[400] = 9.0f;   // a tie at the top: lower id first
    const std::vector<double> ref = log_softmax(logits);
    Ids by_lp(logits.size());
    std::iota(by_lp.begin(), by_lp.end(), 0);
    std::stable_sort(by_lp.begin(), by_lp.end(), [&](int32_t x, int32_t y) { return ref[size_t(x)] > ref[size_t(y)]; });
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_k = 40;
    p.repetition_penalty = 1.5f;
    p.frequency_penalty = 0.7f;
    p.logit_bias = {{3, 30.0f}, {17, -1.0f}};   // processing must not leak into the logprobs
    p.logprobs = 8;
    Sampler s(1000);
    SampledToken out;
    out.top.reserve(8);
    for (uint64_t step = 0; step < 20; ++step) {
        s.sample(logits, p, Ids{400, 2}, Ids{17}, 5, step, out);
        EXPECT_NEAR(out.logprob, ref[size_t(out.token)], 1e-5);
        ASSERT_EQ(out.top.size(), 8u);
        for (size_t j = 0; j < 8; ++j) {
            EXPECT_EQ(out.top[j].first, by_lp[j]) << j;
            EXPECT_NEAR(out.top[j].second, ref[size_t(by_lp[j])], 1e-5);
            if (j > 0) {
                EXPECT_GE(out.top[j - 1].second, out.top[j].second);
            }
        }
    }
    EXPECT_EQ(out.top[0].first, 17);
    EXPECT_EQ(out.top[1].first, 400);
    // Greedy with a bias picks token 3; its logprob is still the raw one.
    p.temperature = 0.0f;
    s.sample(logits, p, {}, {}, 5, 0, out);
    EXPECT_EQ(out.token, 3);
    EXPECT_NEAR(out.logprob, ref[3], 1e-5);
}

TEST(SamplerTest, LogprobsCountAndClearing) {
    const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f};
    const std::vector<double> ref = log_softmax(logits);
    Sampler s(4);
    SampledToken out;
    out.top = {{9, 9.0f}};
    SamplingParams p;
    p.logprobs = 0;
    s.sample(logits, p, {}, {}, 1, 0, out);
    EXPECT_TRUE(out.top.empty());
    EXPECT_NEAR(out.logprob, ref[size_t(out.token)], 1e-6);
    p.logprobs = 10;   // more than the vocab: all of it, best first
    s.sample(logits, p, {}, {}, 1, 0, out);
    ASSERT_EQ(out.top.size(), 4u);
    EXPECT_EQ(out.top[0].first, 1);
    EXPECT_EQ(out.top[1].first, 2);
    EXPECT_EQ(out.top[2].first, 0);
    EXPECT_EQ(out.top[3].first, 3);
    for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(out.top[j].second, ref[size_t(out.top[j].first)], 1e-6);
    p.logprobs = -1;
    s.sample(logits, p, {}, {}, 1, 0, out);
    EXPECT_TRUE(out.top.empty());
    // T = 1 without processing shares the normaliser with the draw: same values.
    p.temperature = 1.0f;
    for (uint64_t step = 0; step < 10; ++step) {
        s.sample(logits, p, {}, {}, 3, step, out);
        EXPECT_NEAR(out.logprob, ref[size_t(out.token)], 1e-6);
    }
}

// ---------------------------------------------------------------- cost

// ---- the stages on their own (Sampler::mask_logits, penalize, choose / keep_prefix, report_logprobs)

TEST(SamplerStages, MaskSetsRefusedTokensToMinusInf) {
    Sampler s(70);
    std::vector<float> raw(70);
    std::iota(raw.begin(), raw.end(), 0.0f);
    const std::vector<uint64_t> mask = {0b1010, uint64_t(1) << 1};   // tokens 1, 3, 65
    const auto m = s.mask_logits(raw, mask);
    for (int i = 0; i < 70; ++i) EXPECT_EQ(m[size_t(i)], i == 1 || i == 3 || i == 65 ? raw[size_t(i)] : -INFINITY) << i;
    EXPECT_EQ(s.mask_logits(raw, {}).data(), raw.data());   // no mask: the row itself
}

TEST(SamplerStages, PenalizeIsEachFormulaOnceAndRawWhenNothingChanges) {
    Sampler s(6);
    const std::vector<float> raw = {2.0f, -1.0f, 3.0f, 0.5f, 1.0f, -2.0f};
    SamplingParams p;
    EXPECT_EQ(s.penalize(raw, p, Ids{0, 1}, Ids{2}).data(), raw.data());   // no bias, no penalty: no copy
    p.logit_bias = {{5, 1.5f}};
    p.repetition_penalty = 2.0f;
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    const Ids prompt = {0, 1, 1}, output = {2, 2, 0, 4};
    const auto got = s.penalize(raw, p, prompt, output);
    // bias → repetition (prompt ∪ output, once) → frequency · count + presence (output only)
    const std::vector<double> want = {2.0 / 2 - 0.25 * 1 - 0.5, -1.0 * 2,  3.0 / 2 - 0.25 * 2 - 0.5, 0.5,
                                      1.0 / 2 - 0.25 * 1 - 0.5, -2.0 + 1.5};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], float(want[i])) << i;
    const auto again = s.penalize(raw, p, prompt, output);   // the scratch was reset
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(again[i], got[i]) << i;
}

TEST(SamplerStages, KeepPrefixIsTopPThenMinPOverTheTopK) {
    Sampler s(5);
    const std::vector<float> logits = {0.0f, std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.0625f)};
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 4;   // order_ / work_ hold the 4 best (p = 1, .5, .25, .125; total 1.875)
    Sampler::RawStats rs;
    s.choose(logits, false, p, 1, 0, 0, rs);
    double kept = 0.0;
    EXPECT_EQ(s.keep_prefix(4, 1.0, 0.0f, 1.875, kept), 4);
    EXPECT_NEAR(kept, 1.875, 1e-6);
    EXPECT_EQ(s.keep_prefix(4, 0.8, 0.0f, 1.875, kept), 2);   // 1.5 ≥ 0.8 · 1.875
    EXPECT_EQ(s.keep_prefix(4, 1.0, 0.3f, 1.875, kept), 2);   // 0.25 < 0.3 · p_max
    EXPECT_EQ(s.keep_prefix(4, 0.1, 0.9f, 1.875, kept), 1);   // at least one
    EXPECT_NEAR(kept, 1.0, 1e-6);
}

TEST(SamplerStages, ChooseIsGreedyOrASeededDrawAndNotesTheRawMax) {
    Sampler s(4);
    const std::vector<float> logits = {0.5f, 2.0f, 1.0f, -1.0f};
    SamplingParams p;
    p.temperature = 0.0f;
    Sampler::RawStats rs;
    EXPECT_EQ(s.choose(logits, false, p, 1, 0, 0, rs), 1);
    EXPECT_TRUE(rs.have_max);
    EXPECT_EQ(rs.max, 2.0f);
    p.temperature = 1.0f;
    Sampler::RawStats a, b;
    const int64_t x = s.choose(logits, false, p, 7, 3, 0, a), y = s.choose(logits, false, p, 7, 3, 0, b);
    EXPECT_EQ(x, y);   // (seed, step, attempt) alone decide the draw
    ASSERT_TRUE(a.have_lse);
    double sum = 0.0;
    for (const float v : logits) sum += std::exp(double(v));
    EXPECT_NEAR(a.lse, std::log(sum), 1e-6);
}

TEST(SamplerStages, ReportLogprobsIsTheRawLogSoftmaxAndItsTopN) {
    Sampler s(4);
    const std::vector<float> raw = {0.5f, 2.0f, 1.0f, -1.0f};
    SamplingParams p;
    p.logprobs = 2;
    SampledToken out;
    s.report_logprobs(raw, 2, p, Sampler::RawStats{}, out);
    double sum = 0.0;
    for (const float v : raw) sum += std::exp(double(v));
    EXPECT_EQ(out.token, 2);
    EXPECT_NEAR(out.logprob, 1.0 - std::log(sum), 1e-6);
    ASSERT_EQ(out.top.size(), 2u);
    EXPECT_EQ(out.top[0].first, 1);
    EXPECT_EQ(out.top[1].first, 2);
    EXPECT_NEAR(out.top[0].second, 2.0 - std::log(sum), 1e-6);
}

TEST(SamplerTest, PerCallTimeAtFullVocab) {
    const int64_t vocab = 163840;
    const std::vector<float> logits = random_logits(vocab, 1, -8.0, 8.0);
    Sampler s(vocab);
    SampledToken out;
    out.top.reserve(20);
    const auto per_call_ms = [&](const SamplingParams& p) {
        const int n = 100;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i) s.sample(logits, p, {}, {}, 1, uint64_t(i), out);
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n;
    };
    SamplingParams greedy_p, t_p, top_p, top_k;
    greedy_p.temperature = 0.0f;
    t_p.temperature = 0.8f;
    top_p.temperature = 0.8f;
    top_p.top_p = 0.9f;
    top_k.temperature = 0.8f;
    top_k.top_k = 50;
    const double g = per_call_ms(greedy_p), t = per_call_ms(t_p), tp = per_call_ms(top_p), tk = per_call_ms(top_k);
    std::printf("[ sampler  ] vocab %lld: greedy %.3f ms, T=0.8 %.3f ms, T=0.8 top_p=0.9 %.3f ms, top_k=50 %.3f ms\n",
                (long long)vocab, g, t, tp, tk);
    // A loose guard (also holds in unoptimised builds): no per-call full sort / quadratic path.
    EXPECT_LT(g, 50.0);
    EXPECT_LT(t, 50.0);
    EXPECT_LT(tp, 100.0);
}

}   // namespace
}   // namespace kimi
