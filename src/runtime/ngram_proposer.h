// Prompt lookup, the "ngram" proposer: the draft is what followed, earlier in the request's own
// tokens (prompt and output so far), the longest suffix n-gram of them. Exactly vLLM's choice:
// the longest n in [min_n, max_n] for which the last n tokens occur earlier (an occurrence may
// overlap them but not be them), the earliest such occurrence, and up to k tokens after it
// (fewer near the end of the tokens or of max-model-len). No model, no state.
// ref: docs/runtime.md#speculative; vLLM v1 spec_decode/ngram_proposer.py.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kimi {

struct NgramParams {
    int32_t min_n = 5, max_n = 5;   // prompt_lookup_min, prompt_lookup_max
    int32_t k = 1;                  // num_speculative_tokens
};

// The draft for `tokens` into `draft` (cleared first; empty: no n-gram of at least min_n
// recurs). O(tokens × max_n); allocates only when `draft` has less than k of capacity.
void ngram_propose(std::span<const int32_t> tokens, const NgramParams& p, int64_t max_model_len,
                   std::vector<int32_t>& draft);

}   // namespace kimi
