// Benchmark statistics with the exact definitions of vLLM's `bench serve` (serve.py
// calculate_metrics): per-request TTFT, TPOT = (E2EL − TTFT) / (output_tokens − 1) for
// requests with more than one token, ITL pooled over every gap of every request, E2EL;
// mean, median, population std and numpy-style linear-interpolation percentiles; and the
// exact two-sided McNemar test on paired correctness.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kimi::bench {

double mean(const std::vector<double>& v);            // 0 for empty
double pop_std(const std::vector<double>& v);         // numpy std (ddof 0)
double percentile(std::vector<double> v, double p);   // numpy.percentile, linear; p in [0, 100]

struct Summary {
    double mean = 0, median = 0, std = 0;
    std::vector<std::pair<double, double>> percentiles;   // (p, value)
};
Summary summarize(const std::vector<double>& v, const std::vector<double>& ps = {99.0});

// One request as the client saw it (seconds).
struct RequestResult {
    bool success = false;
    double ttft = 0, latency = 0;   // latency = E2EL (last token-bearing chunk)
    std::vector<double> itl;        // gaps between token-bearing chunks
    int64_t prompt_tokens = 0, output_tokens = 0;
    double start = 0;   // send time since the benchmark start
    std::string error;
};

struct ServingMetrics {
    int64_t completed = 0, failed = 0, total_input = 0, total_output = 0;
    double duration = 0, request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
    double max_output_tokens_per_s = 0;
    Summary ttft_ms, tpot_ms, itl_ms, e2el_ms;
};
ServingMetrics compute_serving_metrics(const std::vector<RequestResult>& rs, double duration_s,
                                       const std::vector<double>& ps = {99.0});

// Exact two-sided McNemar p-value from the discordant counts (only A right, only B right):
// min(1, 2 · P[Binomial(b + c, 1/2) ≤ min(b, c)]); 1 when there are none.
double mcnemar_exact_p(int64_t only_a, int64_t only_b);

}   // namespace kimi::bench
