// LiveRequest: one submitted request from submission to its last event — the Request the
// scheduler and runner see, the stream its consumer reads, and what turns its sampled tokens
// into events: the streaming detokenizer with its stop strings, the grammar matcher of
// structured output, and top-logprob vectors reserved at submission (no allocation per token).
// The engine keeps the live ones by request id.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/request.h"
#include "runtime/request_stream.h"
#include "runtime/structured_output.h"
#include "runtime/text_stream.h"

namespace kimi {

struct LiveRequest {
    Request req;
    std::shared_ptr<RequestStream> stream;
    std::unique_ptr<TextStream> text;
    std::vector<std::vector<std::pair<int32_t, float>>> top_pool;   // reserved at submit: no allocation per token
    std::unique_ptr<GrammarState> grammar;                          // structured output (params.structured)
    double t0_ms = 0.0;                                             // submission, on event_clock_ms()
};

// The requests between admission and their last event, by id.
using LiveRequests = std::unordered_map<uint64_t, std::unique_ptr<LiveRequest>>;

// Milliseconds on the steady clock: event times (TokenEvent::time_ms) and step times.
inline double event_clock_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}   // namespace kimi
