// bench model's speculation rows (see bench_model_spec.h).
#include "bench_model_spec.h"

#include <cmath>
#include <cstdio>

#include "decode_cohort.h"

namespace kimi::app {

using J = nlohmann::ordered_json;

double expected_tokens_per_step(double alpha, int32_t k) {
    if (alpha >= 1.0) return double(k + 1);
    return (1.0 - std::pow(alpha, double(k + 1))) / (1.0 - alpha);
}

namespace {
// The alpha in [0, 1] at which a speculating sequence gains `e` tokens per step (1 <= e <= k + 1):
// expected_tokens_per_step rises monotonically, so bisection.
double alpha_for(double e, int32_t k) {
    double lo = 0, hi = 1;
    for (int i = 0; i < 100; ++i) {
        const double mid = 0.5 * (lo + hi);
        (expected_tokens_per_step(mid, k) < e ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}
}   // namespace

J speculation_curve(double plain_ms, double verify_ms, int32_t b, int32_t s, int32_t k) {
    const double plain_tps = 1e3 * double(b) / plain_ms;
    J curve = J::array();
    for (int i = 0; i <= 10; ++i) {
        const double alpha = double(i) / 10, e = expected_tokens_per_step(alpha, k);
        // the s speculating sequences gain e tokens a step, the others one
        const double tps = 1e3 * (double(s) * e + double(b - s)) / verify_ms;
        curve.push_back(
            {{"alpha", alpha}, {"expected_tokens_per_step", e}, {"tokens_per_s", tps}, {"speedup", tps / plain_tps}});
    }
    // break-even: s·E + (b − s) = b · verify / plain
    const double e_even = s > 0 ? 1.0 + double(b) * (verify_ms / plain_ms - 1.0) / double(s) : 1e300;
    J crossover = nullptr;
    if (e_even <= 1.0)
        crossover = 0.0;
    else if (e_even <= double(k + 1))
        crossover = alpha_for(e_even, k);
    return {{"plain_tokens_per_s", plain_tps},
            {"curve", curve},
            {"crossover_acceptance", crossover},
            {"crossover_mean_acceptance_length", e_even <= double(k + 1) ? J(std::max(1.0, e_even)) : J(nullptr)}};
}

J spec_end_to_end(Engine& plain, Engine& spec, const std::vector<std::vector<int32_t>>& prompts, int32_t output_len,
                  int64_t warmup, int64_t runs, const std::function<void()>& on_run,
                  std::span<const std::pair<int32_t, float>> logit_bias) {
    std::vector<RunResult> got[2];
    Engine* engines[2] = {&plain, &spec};
    for (int64_t run = 0; run < warmup + runs; ++run)
        for (int64_t i = 0; i < 2; ++i) {
            const size_t v = size_t((run + i) % 2);   // alternate who goes first
            RunResult r = run_cohort(*engines[v], prompts, output_len, logit_bias);
            if (run >= warmup) got[v].push_back(std::move(r));
            on_run();
        }
    J p = runs_json(got[0]), s = runs_json(got[1]);
    const double conc = double(prompts.size());
    const double plain_tps = 1e3 * conc / p["mean_tpot_ms"].get<double>();
    const double spec_tps = 1e3 * conc / s["mean_tpot_ms"].get<double>();
    return {{"concurrency", prompts.size()},
            {"prompt_tokens", prompts.empty() ? size_t(0) : prompts[0].size()},
            {"output_len", output_len},
            {"warmup", warmup},
            {"runs", runs},
            {"spec_decode", spec_decode_json(got[1])},
            {"plain_tokens_per_s", plain_tps},
            {"speculative_tokens_per_s", spec_tps},
            {"speedup", spec_tps / plain_tps},
            {"plain", p},
            {"speculative", s}};
}

void print_speculation(const J& decode, const J& e2e, const std::string& config) {
    std::printf(
        "\nspeculation (%s): a verification step runs 1 + k tokens per speculating sequence; speedup "
        "expected at acceptance alpha (i.i.d.)\n",
        config.c_str());
    std::printf(
        "| test | plain step ms | verify step ms | verify / plain | crossover alpha | speedup @ 0.5 | @ 0.7 | "
        "@ 0.9 |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const J& row : decode) {
        const J& sp = row["speculative"];
        const double plain = row["step_ms"]["median"].get<double>(),
                     verify = sp["verify_step_ms"]["median"].get<double>();
        const J& x = sp["crossover_acceptance"];
        char cross[32] = "never";
        if (!x.is_null()) std::snprintf(cross, sizeof cross, "%.3f", x.get<double>());
        std::printf("| %s | %.2f | %.2f | %.2f | %s | %.2fx | %.2fx | %.2fx |\n",
                    row["test"].get<std::string>().c_str(), plain, verify, verify / plain, cross,
                    sp["curve"][5]["speedup"].get<double>(), sp["curve"][7]["speedup"].get<double>(),
                    sp["curve"][9]["speedup"].get<double>());
    }
    const J& sd = e2e["spec_decode"];
    std::printf(
        "\nend to end (batch %lld, %lld-token prompts, %d tokens, %lld runs interleaved): plain %.1f tok/s, "
        "speculative %.1f tok/s (%.2fx); acceptance rate %.3f, mean acceptance length %.2f (%lld drafts)\n",
        (long long)e2e["concurrency"].get<int64_t>(), (long long)e2e["prompt_tokens"].get<int64_t>(),
        e2e["output_len"].get<int>(), (long long)e2e["runs"].get<int64_t>(), e2e["plain_tokens_per_s"].get<double>(),
        e2e["speculative_tokens_per_s"].get<double>(), e2e["speedup"].get<double>(),
        sd["acceptance_rate"].get<double>(), sd["mean_acceptance_length"].get<double>(),
        (long long)sd["num_drafts"].get<int64_t>());
}

bench::LineChart speculation_chart(const J& decode) {
    bench::LineChart c{"speculation: expected speedup by acceptance", "acceptance alpha", "speedup over plain", {}};
    for (const J& row : decode) {
        bench::PlotSeries s;
        s.name = "b" + std::to_string(row["batch"].get<int>()) + " d" + std::to_string(row["context"].get<int>());
        for (const J& p : row["speculative"]["curve"])
            s.points.push_back({p["alpha"].get<double>(), p["speedup"].get<double>()});
        c.series.push_back(std::move(s));
    }
    c.series.push_back({"break-even", {{0.0, 1.0}, {1.0, 1.0}}, {}});
    return c;
}

}   // namespace kimi::app
