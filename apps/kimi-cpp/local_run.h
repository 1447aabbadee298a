// Running one request in-process to completion for the terminal commands (generate, chat):
// drives Engine::step() on the calling thread, hands each token event to a callback as it
// arrives, shows prefill progress for long prompts, and turns Ctrl-C into a cancel.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "progress.h"
#include "runtime/engine.h"

namespace kimi::app {

// SIGINT sets a flag instead of killing the process (no SA_RESTART: a blocking read returns
// EINTR). take_interrupt() reports and clears it.
void install_interrupt_handler();
bool take_interrupt();

struct LocalResult {
    std::vector<int32_t> tokens;
    std::string text;
    std::vector<TokenEvent> events;   // kept only when keep_events (logprobs for --json)
    FinishReason finish = FinishReason::kNone;
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;              // prompt tokens served from the prefix cache
    double first_ms = 0.0, last_ms = 0.0;   // event times since submission (first = TTFT)
    bool interrupted = false;

    // Prompt tokens computed (those served from the prefix cache cost nothing) per second to the first token.
    double prefill_tok_per_s() const {
        return first_ms > 0 ? double(prompt_tokens - cached_tokens) / (first_ms / 1e3) : 0.0;
    }
    double decode_tok_per_s() const {
        return tokens.size() > 1 && last_ms > first_ms ? double(tokens.size() - 1) / ((last_ms - first_ms) / 1e3) : 0.0;
    }
};

// Submits and runs until the request finishes (Ctrl-C cancels it: finish == kAbort).
// step_stats: one JSON line per engine step on stderr (batch, tokens, prefill/decode split,
// step time, attention-output copies, heap allocations).
// media: the prompt's images (K3 vision), encoded.
LocalResult run_local(Engine& engine, std::vector<int32_t> prompt, const SamplingParams& params,
                      const std::function<void(const TokenEvent&)>& on_event, bool quiet, bool keep_events,
                      bool step_stats = false, std::span<const MediaSpan> media = {});

std::string step_stats_json(const EngineStepStats& s);

// "prefill 30 tok 12.3 ms (2439 tok/s) | decode 15 tok 80.1 ms (187 tok/s) | TTFT 12.3 ms | finish length"
std::string timing_line(const LocalResult& r);

}   // namespace kimi::app
