// Running one OpenAI generation job on the engine: every (prompt, choice) pair becomes an
// engine request; their token events are followed together and turned into OpenAI's
// response objects — one JSON body, or SSE chunks written as each token exists (no
// role-only chunk before the first token). Logprobs in OpenAI's shapes, usage with
// prompt_tokens_details.cached_tokens, tool calls in the model's native markers parsed into
// `tool_calls`. A failed write (client gone) cancels every request of the job.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
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

// A fresh response id: prefix + 24 hex digits.
std::string random_id(const char* prefix);

// A job whose requests were submitted to the engine; they are cancelled when it is destroyed
// before they finished (the client went away).
struct JobRun;

// Submits every request of the job: throws ApiError 400 if the engine refuses one (a bad
// prompt), 503 if memory runs out or the engine failed; nothing stays queued then.
std::shared_ptr<JobRun> start_job(std::shared_ptr<const GenerationJob> job, const GenerateContext& ctx);

// Waits for the job and answers it (throws ApiError 503 if the engine failed it meanwhile).
nlohmann::ordered_json run_job(JobRun& run);

// One chat choice's reply as typed pieces, for the routes that are not OpenAI chat completions
// (Anthropic Messages, OpenAI Responses): reasoning text, content text and finished tool calls
// (chat::Delta), in the order the model produced them, each as soon as it is certain.
struct ChatOutcome {
    FinishReason finish = FinishReason::kNone;
    bool tool_calls = false;   // the reply ended in tool calls
    int32_t stop_index = -1;   // finish by a stop string: its index in params.stop
    int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
};
// Runs a single-choice chat job: on_piece gets each piece, on_idle is called when nothing came
// for a while (a long prefill); either returning false (the client went away) cancels the job,
// and the result is nullopt then. Throws ApiError 503 if the engine failed the request.
std::optional<ChatOutcome> run_chat_pieces(JobRun& run, const std::function<bool(const chat::Delta&)>& on_piece,
                                           const std::function<bool()>& on_idle);
// The usage counts of a job so far (also before it finished).
ChatOutcome chat_outcome(JobRun& run);

// What a job has done so far, for the access log: prompt tokens (each prompt once), those the
// prefix cache served, tokens generated, and when the first came (steady clock seconds; -1: none).
struct JobTally {
    int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
    double t_first = -1.0;
};
JobTally job_tally(JobRun& run);

// Streaming: each SSE event (`data: ...\n\n`, then `data: [DONE]\n\n`) goes to `write`,
// which returns false if the client went away. Returns false if the stream was cut short.
bool run_job_streaming(JobRun& run, const std::function<bool(const std::string&)>& write);

}   // namespace kimi::server
