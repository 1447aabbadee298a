// SpeculativeConfig: `--speculative-config JSON` as vLLM reads it (serve, generate, bench model,
// bench decode). Methods: "ngram" (prompt lookup: num_speculative_tokens, prompt_lookup_min,
// prompt_lookup_max; both lookup bounds default to 5, one given sets the other) and
// "draft_model" (model: a Kimi Linear or K3 directory with the target's tokenizer). vLLM's
// spelling {"model": "ngram"} without a method means ngram. ref: docs/runtime.md#speculative.
#pragma once
#include <cstdint>
#include <string>

namespace kimi {

struct SpeculativeConfig {
    enum class Method : uint8_t { kNone, kNgram, kDraftModel };
    Method method = Method::kNone;
    int32_t num_speculative_tokens = 0;   // k: tokens proposed per step
    int32_t prompt_lookup_min = 0;        // ngram: the shortest suffix n-gram looked up
    int32_t prompt_lookup_max = 0;        // ngram: the longest
    std::string model;                    // draft_model: its directory

    bool enabled() const { return method != Method::kNone; }
    std::string describe() const;   // one line for startup logs: "ngram, k=4, n-grams 2..5"
};

// Throws kimi::Error naming the key for anything vLLM would refuse (unknown method or key,
// k < 1, lookup bounds < 1 or min > max, a draft model without its directory).
SpeculativeConfig parse_speculative_config(const std::string& json);

}   // namespace kimi
