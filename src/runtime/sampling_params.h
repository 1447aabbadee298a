// SamplingParams: how one request chooses its next token and when it stops (OpenAI / vLLM
// semantics). Validated by the server before a request is admitted.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kimi {

class StructuredOutput;   // structured_output.h

struct SamplingParams {
    float temperature = 1.0f;          // 0 → greedy (argmax, ties to the lowest id)
    int32_t top_k = 0;                 // ≤ 0 → off
    float top_p = 1.0f;                // (0, 1]; 1 → off
    float min_p = 0.0f;                // [0, 1]; 0 → off
    float presence_penalty = 0.0f;     // OpenAI: − p·[token occurred in the output]
    float frequency_penalty = 0.0f;    // OpenAI: − f·count(token in the output)
    float repetition_penalty = 1.0f;   // vLLM/HF: tokens in prompt or output: logit/r if > 0 else logit·r
    std::vector<std::pair<int32_t, float>> logit_bias;   // added to the logits before anything else
    std::optional<uint64_t> seed;                        // same seed → same tokens, whatever else is batched
    int32_t max_tokens = 16;
    std::vector<int32_t> stop_token_ids;
    std::vector<std::string> stop;   // stop strings (matched on the text, excluded from the output)
    bool ignore_eos = false;
    bool skip_special_tokens = true;           // special tokens add no text (they still count as tokens)
    std::vector<int32_t> keep_special_ids;     // ...except these (a chat format's markers, for its parser)
    bool include_stop_str_in_output = false;   // vLLM: keep the matched stop string at the end of the text
    int32_t logprobs = -1;                     // -1: none; N ≥ 0: the sampled token's logprob + top-N alternatives
    // A grammar the output must follow (JSON Schema, regex, choice, GBNF): tokens it refuses are
    // masked before anything else; end-of-sequence only where it may end. null: free text.
    std::shared_ptr<const StructuredOutput> structured;

    bool greedy() const { return temperature <= 0.0f; }
};

}   // namespace kimi
