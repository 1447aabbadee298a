// `bench model --speculative-config`: when speculation pays, per decode row. Each row times,
// interleaved with its plain decode steps, the engine's verification step — B sequences each
// verifying a full draft of k tokens (EngineConfig::speculative_full_drafts; a draft model's
// own steps included) — and turns the two times into the expected tokens/s at acceptance
// alpha = 0, 0.1, ..., 1 under the i.i.d. model (each draft token accepted with probability
// alpha until the first rejection) and the crossover where speculation breaks even. One
// end-to-end point then runs the same cohort through a plain and a speculating engine,
// interleaved (bench decode's workload: a random prompt repeated --repeat-prompt times), for
// the measured acceptance and tokens/s. ref: docs/measuring.md, docs/performance.md#speculative.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/plot.h"
#include "runtime/engine.h"

namespace kimi::app {

// Tokens one sequence gains per verification of k draft tokens, each accepted with
// probability alpha until the first rejection: (1 - alpha^(k+1)) / (1 - alpha), k + 1 at 1.
double expected_tokens_per_step(double alpha, int32_t k);

// A decode row's `speculative` object from its plain and verification step times (ms): B
// sequences, s of them speculating (speculative_max_seqs), k draft tokens each. The curve
// (alpha, expected tokens per step of a speculating sequence, the batch's tokens/s, speedup over
// plain decoding), the crossover acceptance (0 when even alpha = 0 breaks even, null when not
// even alpha = 1 does) and the mean acceptance length that breaks even.
nlohmann::ordered_json speculation_curve(double plain_ms, double verify_ms, int32_t b, int32_t s, int32_t k);

// The end-to-end point: `warmup` + `runs` cohorts of `prompts` (output_len tokens each) on each
// engine, interleaved with the order alternating; on_run after each. Per variant bench decode's
// figures, the speculating engine's spec_decode, decode tokens/s and the speedup. logit_bias:
// the requests' (--logit-bias: an output that repeats).
nlohmann::ordered_json spec_end_to_end(Engine& plain, Engine& spec, const std::vector<std::vector<int32_t>>& prompts,
                                       int32_t output_len, int64_t warmup, int64_t runs,
                                       const std::function<void()>& on_run,
                                       std::span<const std::pair<int32_t, float>> logit_bias = {});

// The human-readable lines: one table row per decode row, then the end-to-end point.
void print_speculation(const nlohmann::ordered_json& decode, const nlohmann::ordered_json& e2e,
                       const std::string& config);

// Speedup against acceptance, one line per decode row, and the break-even line.
bench::LineChart speculation_chart(const nlohmann::ordered_json& decode);

}   // namespace kimi::app
