// RequestStream: the consumer side of one submitted request — its TokenEvents in order (token
// id, text piece, logprobs, time since submission), the last one with finish set — and the
// StreamNotifier that wakes one consumer following several streams. The engine produces the
// events (OutputProcessor publishes them); any thread may consume them.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/request.h"

namespace kimi {

struct TokenEvent {
    int32_t token = -1;   // -1 on a final event that carries no token (abort)
    std::string text;     // text that became final with this event (with a tokenizer)
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;
    FinishReason finish = FinishReason::kNone;
    int32_t stop_index = -1;     // finish == kStop by a stop string: its index in params.stop
    double time_ms = 0.0;        // since submission
    int64_t cached_tokens = 0;   // prompt tokens the request took from the prefix cache
    // finish == kAbort because the engine failed it: why (shared by the requests it failed:
    // failing them allocates nothing, also when memory ran out); null otherwise.
    std::shared_ptr<const std::string> error;
};

// Wakes one consumer that follows several streams (n > 1 choices, several prompts): every
// event pushed to a stream attached to it bumps a sequence number.
class StreamNotifier {
public:
    void notify();
    // Waits until the sequence number differs from `seen` or `timeout` passes; updates `seen`.
    void wait_for(uint64_t& seen, std::chrono::milliseconds timeout);

private:
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t seq_ = 0;
};

// The consumer side of one request: events in order, the last has finish != kNone.
class RequestStream {
public:
    uint64_t id() const { return id_; }
    bool next(TokenEvent& out);       // blocks; false once the final event was taken
    bool try_next(TokenEvent& out);   // does not block; false if no event is ready
private:
    friend class Engine;            // creates it (notifier, reserved events)
    friend class RequestInbox;      // gives it its id; cancel(RequestStream&) flags it
    friend class OutputProcessor;   // publishes its events
    void push(TokenEvent&& e);
    uint64_t id_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<TokenEvent> events_;
    size_t read_ = 0;
    bool closed_ = false;
    std::shared_ptr<StreamNotifier> notifier_;
    std::atomic<bool> cancel_requested_{false};   // Engine::cancel(RequestStream&) (RequestInbox)
};

}   // namespace kimi
