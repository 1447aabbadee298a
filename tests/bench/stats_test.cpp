// Benchmark statistics against hand-computed examples: numpy percentiles, population std,
// TPOT excluding the first token, ITL pooled per gap, throughputs, exact McNemar.
#include <gtest/gtest.h>

#include "bench/stats.h"

namespace kimi::bench {
namespace {

TEST(Stats, PercentileIsNumpyLinear) {
    // numpy.percentile([1, 2, 3, 4], 50) = 2.5; 99 → 3.97; 0 → 1; 100 → 4.
    const std::vector<double> v = {4, 1, 3, 2};
    EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
    EXPECT_NEAR(percentile(v, 99), 3.97, 1e-12);
    EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
    EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
    EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
    EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(Stats, PopulationStd) {
    // numpy.std([2, 4, 4, 4, 5, 5, 7, 9]) = 2.0
    EXPECT_DOUBLE_EQ(pop_std({2, 4, 4, 4, 5, 5, 7, 9}), 2.0);
    EXPECT_DOUBLE_EQ(pop_std({3}), 0.0);
}

TEST(Stats, ServingMetricsFollowVllm) {
    RequestResult a;   // 4 tokens: ttft 0.1, gaps 0.02, 0.03, 0.04 → latency 0.19
    a.success = true;
    a.ttft = 0.1;
    a.itl = {0.02, 0.03, 0.04};
    a.latency = 0.19;
    a.prompt_tokens = 10;
    a.output_tokens = 4;
    RequestResult b;   // 1 token: no TPOT
    b.success = true;
    b.ttft = 0.3;
    b.latency = 0.3;
    b.prompt_tokens = 5;
    b.output_tokens = 1;
    RequestResult c;   // failed: ignored except for the count
    c.success = false;
    const ServingMetrics m = compute_serving_metrics({a, b, c}, 2.0);
    EXPECT_EQ(m.completed, 2);
    EXPECT_EQ(m.failed, 1);
    EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
    EXPECT_DOUBLE_EQ(m.output_throughput, 2.5);
    EXPECT_DOUBLE_EQ(m.total_token_throughput, 10.0);
    EXPECT_NEAR(m.tpot_ms.mean, 30.0, 1e-9);   // (190 − 100) / 3, TPOT excludes the first token
    EXPECT_EQ(m.tpot_ms.std, 0.0);             // one request has a TPOT
    EXPECT_NEAR(m.itl_ms.mean, 30.0, 1e-9);    // pooled gaps 20, 30, 40
    EXPECT_NEAR(m.itl_ms.median, 30.0, 1e-9);
    EXPECT_NEAR(m.itl_ms.percentiles[0].second, 39.8, 1e-9);
    EXPECT_NEAR(m.ttft_ms.mean, 200.0, 1e-9);
    EXPECT_NEAR(m.ttft_ms.std, 100.0, 1e-9);
    EXPECT_NEAR(m.e2el_ms.median, 245.0, 1e-9);
}

TEST(Stats, McNemarExact) {
    EXPECT_NEAR(mcnemar_exact_p(17, 8), 0.1078, 5e-5);   // the published figure
    EXPECT_NEAR(mcnemar_exact_p(8, 17), 0.1078, 5e-5);   // symmetric
    EXPECT_DOUBLE_EQ(mcnemar_exact_p(0, 0), 1.0);        // no discordant pairs
    EXPECT_DOUBLE_EQ(mcnemar_exact_p(5, 5), 1.0);        // ties cap at 1
    EXPECT_NEAR(mcnemar_exact_p(0, 5), 0.0625, 1e-12);   // 2 / 2^5
    EXPECT_NEAR(mcnemar_exact_p(1, 0), 1.0, 1e-12);
    EXPECT_NEAR(mcnemar_exact_p(10, 0), 2.0 / 1024, 1e-12);
}

}   // namespace
}   // namespace kimi::bench
