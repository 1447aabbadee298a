// Running one OpenAI generation job on the engine: every (prompt, choice) pair becomes an
// engine request; their token events are followed together and turned into OpenAI's
// response objects — one JSON body, or SSE chunks written as each token exists (no
// role-only chunk before the first token). Logprobs in OpenAI's shapes, usage with
// prompt_tokens_details.cached_tokens, tool calls in the model's native markers parsed into
// `tool_calls`. A failed write (client gone) cancels every request of the job.
#pragma once
#include <atomic>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace kimi::server {

struct GenerateContext {
    Engine& engine;
    const tok::Tokenizer& tok;
    ServerMetrics& metrics;
    std::string system_fingerprint;
    const std::atomic<bool>* abort_all = nullptr;   // set at shutdown: cancel what is running
};

// Submits the job (throws ApiError 400 if the engine rejects a request) and waits for it.
nlohmann::ordered_json run_job(const GenerationJob& job, GenerateContext& ctx);

// Streaming: each SSE event (`data: ...\n\n`, then `data: [DONE]\n\n`) goes to `write`,
// which returns false if the client went away. Returns false if the stream was cut short.
bool run_job_streaming(const GenerationJob& job, GenerateContext& ctx, const std::function<bool(const std::string&)>& write);

}  // namespace kimi::server
