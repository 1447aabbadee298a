// The fixed decode cohort (see decode_cohort.h).
#include "decode_cohort.h"

#include <chrono>

#include "bench/stats.h"
#include "core/error.h"

namespace kimi::app {

using J = nlohmann::ordered_json;

std::vector<std::vector<int32_t>> cohort_prompts(Rng& rng, int64_t vocab, int64_t conc, int64_t prefix, int64_t suffix,
                                                 int64_t repeat) {
    std::vector<int32_t> shared;
    for (int64_t i = 0; i < prefix; ++i) shared.push_back(int32_t(rng.below(uint64_t(vocab))));
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t c = 0; c < conc; ++c) {
        std::vector<int32_t> p = shared;
        for (int64_t i = 0; i < suffix; ++i) p.push_back(int32_t(rng.below(uint64_t(vocab))));
        std::vector<int32_t> repeated;
        for (int64_t k = 0; k < repeat; ++k) repeated.insert(repeated.end(), p.begin(), p.end());
        prompts.push_back(std::move(repeated));
    }
    return prompts;
}

namespace {
// The cohort's run: token times per request (ms since submission) and the steady-state steps.
RunResult drive_cohort(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int32_t output_len,
                       std::span<const std::pair<int32_t, float>> logit_bias) {
    SamplingParams p;
    p.temperature = 0;
    p.logit_bias.assign(logit_bias.begin(), logit_bias.end());
    p.max_tokens = output_len;
    p.ignore_eos = true;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& pr : prompts) streams.push_back(e.submit(pr, p));
    std::vector<std::vector<double>> times(prompts.size());   // token event times (ms since submission)
    RunResult r;
    for (;;) {
        const bool ran = e.step();
        if (ran) {
            const EngineStepStats& s = e.last_step();
            if (s.n_prefill_tokens == 0 && s.n_decode_seqs == int32_t(prompts.size())) {   // steady-state decode
                ++r.decode_steps;
                r.copies += s.attn_output_copies;
                r.allocations += s.step_heap_allocations;
                r.step_ms += s.step_ms;
            }
        }
        bool all_done = true;
        for (size_t i = 0; i < streams.size(); ++i) {
            TokenEvent ev;
            while (streams[i]->try_next(ev)) {
                if (ev.token >= 0) times[i].push_back(ev.time_ms);
                if (times[i].size() == 1 && ev.token >= 0) r.cached_tokens += ev.cached_tokens;
            }
            all_done &= times[i].size() == size_t(output_len);
        }
        if (all_done) break;
        if (!ran) throw Error("internal: the engine went idle before the cohort finished");
    }
    while (e.step()) {}
    r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> tpots, ttfts;
    for (const auto& t : times) {
        ++r.completed;
        if (!t.empty()) ttfts.push_back(t.front());
        r.output_tokens += int64_t(t.size());
        if (t.size() > 1) tpots.push_back((t.back() - t.front()) / double(t.size() - 1));
        for (size_t k = 1; k < t.size(); ++k) r.itl_ms.push_back(t[k] - t[k - 1]);
    }
    r.mean_tpot_ms = bench::mean(tpots);
    r.mean_ttft_ms = bench::mean(ttfts);
    r.median_itl_ms = bench::percentile(r.itl_ms, 50);
    r.p99_itl_ms = bench::percentile(r.itl_ms, 99);
    r.output_throughput = double(r.output_tokens) / r.duration_s;
    return r;
}
}   // namespace

RunResult run_cohort(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int32_t output_len,
                     std::span<const std::pair<int32_t, float>> logit_bias) {
    const SpecDecodeStats before = e.spec_decode_stats();
    RunResult r = drive_cohort(e, prompts, output_len, logit_bias);
    const SpecDecodeStats& after = e.spec_decode_stats();
    r.drafts = after.drafts - before.drafts;
    r.draft_tokens = after.draft_tokens - before.draft_tokens;
    r.accepted_tokens = after.accepted_tokens - before.accepted_tokens;
    return r;
}

J spec_decode_json(std::span<const RunResult> runs) {
    int64_t drafts = 0, draft_tokens = 0, accepted = 0;
    for (const auto& r : runs) drafts += r.drafts, draft_tokens += r.draft_tokens, accepted += r.accepted_tokens;
    return {{"num_drafts", drafts},
            {"num_draft_tokens", draft_tokens},
            {"num_accepted_tokens", accepted},
            {"acceptance_rate", draft_tokens ? double(accepted) / double(draft_tokens) : 0.0},
            {"mean_acceptance_length", drafts ? 1.0 + double(accepted) / double(drafts) : 1.0}};
}

J runs_json(std::span<const RunResult> runs) {
    std::vector<double> tpot, med, p99, thr, ttft;
    int64_t steps = 0, copies = 0, allocs = 0, completed = 0, cached = 0;
    double step_ms = 0;
    for (const auto& r : runs) {
        tpot.push_back(r.mean_tpot_ms);
        med.push_back(r.median_itl_ms);
        p99.push_back(r.p99_itl_ms);
        thr.push_back(r.output_throughput);
        steps += r.decode_steps;
        copies += r.copies;
        allocs += r.allocations;
        step_ms += r.step_ms;
        completed += r.completed;
        cached += r.cached_tokens;
        ttft.push_back(r.mean_ttft_ms);
    }
    const double per = steps ? 1.0 / double(steps) : 0.0;
    return {{"mean_tpot_ms", bench::mean(tpot)},
            {"std_tpot_ms", bench::pop_std(tpot)},
            {"median_itl_ms", bench::mean(med)},
            {"std_median_itl_ms", bench::pop_std(med)},
            {"p99_itl_ms", bench::mean(p99)},
            {"std_p99_itl_ms", bench::pop_std(p99)},
            {"output_throughput", bench::mean(thr)},
            {"std_output_throughput", bench::pop_std(thr)},
            {"mean_ttft_ms", bench::mean(ttft)},
            {"std_ttft_ms", bench::pop_std(ttft)},
            {"cached_tokens_per_run", runs.empty() ? 0.0 : double(cached) / double(runs.size())},
            {"completed", completed},
            {"runs", runs.size()},
            {"decode_steps", steps},
            {"attn_output_copies_per_step", double(copies) * per},
            {"allocations_per_step", double(allocs) * per},
            {"step_ms", step_ms * per},
            {"per_run_tpot_ms", tpot},
            {"per_run_output_throughput", thr}};
}

}   // namespace kimi::app
