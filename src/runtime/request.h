// Request: one generation request as the scheduler and runner see it — integers and
// parameters only. vLLM v1 semantics: no prefill/decode phases; a request has
// num_tokens() known tokens (prompt + output so far) and n_computed of them are in the
// cache; each step the scheduler hands it some of the difference.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/sampling_params.h"

namespace kimi {

enum class RequestStatus : uint8_t { kWaiting, kRunning, kFinished };
enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort };

inline const char* finish_reason_name(FinishReason r) {   // "stop", "length", "abort", ""
    switch (r) {
        case FinishReason::kStop: return "stop";
        case FinishReason::kLength: return "length";
        case FinishReason::kAbort: return "abort";
        case FinishReason::kNone: return "";
    }
    return "";
}

struct Request {
    uint64_t id = 0;
    std::vector<int32_t> prompt;
    std::vector<int32_t> output;
    SamplingParams params;
    uint64_t seed = 0;        // params.seed, or one drawn at submission
    int64_t n_computed = 0;   // tokens whose KV/state is in the cache
    RequestStatus status = RequestStatus::kWaiting;
    FinishReason finish = FinishReason::kNone;
    bool abort_requested = false;
    int32_t n_preemptions = 0;
    int64_t n_cached_tokens = 0;    // prompt tokens served from the prefix cache at admission
    uint64_t tail_checkpoint = 0;   // the KDA checkpoint this request moves forward as it decodes
    uint64_t group = 0;             // the client request it belongs to (its n × prompts share one)

    int64_t num_tokens() const { return int64_t(prompt.size() + output.size()); }
    int64_t token_at(int64_t i) const {
        return i < int64_t(prompt.size()) ? prompt[size_t(i)] : output[size_t(i - int64_t(prompt.size()))];
    }
};

}   // namespace kimi
