// Benchmark statistics (see stats.h).
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace kimi::bench {

double mean(const std::vector<double>& v) {
    if (v.empty()) return 0.0;
    double s = 0.0;
    for (double x : v) s += x;
    return s / double(v.size());
}

double pop_std(const std::vector<double>& v) {
    if (v.empty()) return 0.0;
    const double m = mean(v);
    double s = 0.0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size()));
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const double pos = p / 100.0 * double(v.size() - 1);
    const size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Summary summarize(const std::vector<double>& v, const std::vector<double>& ps) {
    Summary s;
    s.mean = mean(v);
    s.median = percentile(v, 50.0);
    s.std = pop_std(v);
    for (double p : ps) s.percentiles.push_back({p, percentile(v, p)});
    return s;
}

ServingMetrics compute_serving_metrics(const std::vector<RequestResult>& rs, double duration_s,
                                       const std::vector<double>& ps) {
    ServingMetrics m;
    std::vector<double> ttft, tpot, itl, e2el;
    std::map<int64_t, double> per_second;   // output tokens by 1-second bucket of their timestamps
    for (const auto& r : rs) {
        if (!r.success) {
            ++m.failed;
            continue;
        }
        ++m.completed;
        m.total_input += r.prompt_tokens;
        m.total_output += r.output_tokens;
        ttft.push_back(r.ttft * 1e3);
        e2el.push_back(r.latency * 1e3);
        if (r.output_tokens > 1) tpot.push_back((r.latency - r.ttft) / double(r.output_tokens - 1) * 1e3);
        for (double g : r.itl) itl.push_back(g * 1e3);
        // Token timestamps: start + ttft + cumulative itl (vLLM's peak-throughput reconstruction).
        double t = r.start + r.ttft;
        per_second[int64_t(std::floor(t))] += 1;
        for (double g : r.itl) {
            t += g;
            per_second[int64_t(std::floor(t))] += 1;
        }
    }
    m.duration = duration_s;
    if (duration_s > 0) {
        m.request_throughput = double(m.completed) / duration_s;
        m.output_throughput = double(m.total_output) / duration_s;
        m.total_token_throughput = double(m.total_input + m.total_output) / duration_s;
    }
    for (const auto& [sec, n] : per_second) m.max_output_tokens_per_s = std::max(m.max_output_tokens_per_s, n);
    m.ttft_ms = summarize(ttft, ps);
    m.tpot_ms = summarize(tpot, ps);
    m.itl_ms = summarize(itl, ps);
    m.e2el_ms = summarize(e2el, ps);
    return m;
}

double mcnemar_exact_p(int64_t only_a, int64_t only_b) {
    const int64_t n = only_a + only_b;
    if (n == 0) return 1.0;
    const int64_t k = std::min(only_a, only_b);
    // Σ_{i ≤ k} C(n, i) / 2^n in log space (exact enough for any realistic n).
    double tail = 0.0;
    for (int64_t i = 0; i <= k; ++i)
        tail += std::exp(std::lgamma(double(n) + 1) - std::lgamma(double(i) + 1) - std::lgamma(double(n - i) + 1) -
                         double(n) * std::log(2.0));
    return std::min(1.0, 2.0 * tail);
}

}   // namespace kimi::bench
