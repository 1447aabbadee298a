// The fixed decode cohort that `bench decode` measures, shared with `bench model
// --speculative-config` (its end-to-end point): one run submits every prompt at once (greedy,
// EOS ignored, exactly output_len tokens each) and drives the engine on this thread; the
// per-run figures (TPOT, ITL, output tokens/s, steady-state step counters, speculative
// decoding's counts) and their JSON summaries, with vLLM's definitions (docs/measuring.md).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "runtime/engine.h"

namespace kimi::app {

struct RunResult {
    double mean_tpot_ms = 0, median_itl_ms = 0, p99_itl_ms = 0, output_throughput = 0, duration_s = 0;
    int64_t completed = 0, output_tokens = 0, cached_tokens = 0;   // cached: prompt tokens from the prefix cache
    double mean_ttft_ms = 0;
    std::vector<double> itl_ms;
    int64_t decode_steps = 0, copies = 0, allocations = 0;
    double step_ms = 0;
    int64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;   // speculative decoding, this run
};

// `conc` prompts: a shared `prefix` of random ids plus a distinct `suffix` each, the whole
// repeated `repeat` times (the workload where prompt lookup pays).
std::vector<std::vector<int32_t>> cohort_prompts(Rng& rng, int64_t vocab, int64_t conc, int64_t prefix, int64_t suffix,
                                                 int64_t repeat);

// One cohort, all submitted at once, driven step by step on this thread; with the run's
// speculative-decoding counts (the engine's are cumulative). logit_bias (--logit-bias): added to
// the greedy logits, a workload whose output repeats (a few tokens favoured).
RunResult run_cohort(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int32_t output_len,
                     std::span<const std::pair<int32_t, float>> logit_bias = {});

// Over a variant's measured runs: each figure's mean ± population std across runs, and the
// steady-state step counters.
nlohmann::ordered_json runs_json(std::span<const RunResult> runs);
// Acceptance over a speculating variant's runs, as vLLM defines it: acceptance_rate =
// accepted / draft tokens, mean_acceptance_length = 1 + accepted / drafts.
nlohmann::ordered_json spec_decode_json(std::span<const RunResult> runs);

}   // namespace kimi::app
