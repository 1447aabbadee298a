// Parsing and validating OpenAI request bodies (/v1/completions, /v1/chat/completions) into
// a GenerationJob: token-id prompts plus sampling parameters, every field type- and
// range-checked (ApiError 400 naming the parameter; 404 for an unknown model). Field names
// and defaults follow OpenAI, with vLLM's extra sampling fields (top_k, min_p,
// repetition_penalty, stop_token_ids, ignore_eos, skip_special_tokens,
// include_stop_str_in_output). ref: vLLM entrypoints/openai/protocol.py.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "grammar/grammar.h"
#include "runtime/request.h"
#include "runtime/sampling_params.h"
#include "server/media_loader.h"
#include "tokenizer/tokenizer.h"

namespace kimi::server {

enum class Endpoint { kCompletions, kChat };

struct PromptInput {
    std::vector<int32_t> ids;
    std::string text;                   // the prompt as text (for echo)
    std::vector<PendingImage> images;   // K3 chat: its images, in prompt order (their pad runs in ids), headers read
    std::vector<MediaSpan> media;       // the same, encoded (set after parsing: HttpServer)
};

struct GenerationJob {
    Endpoint endpoint = Endpoint::kCompletions;
    std::string model;                  // as the response reports it
    std::vector<PromptInput> prompts;   // chat: exactly one
    SamplingParams params;              // per choice; seed + choice index when seeded
    int32_t n = 1;
    bool stream = false, include_usage = false, continuous_usage = false;
    bool echo = false;       // completions
    bool logprobs = false;   // report logprobs (top N = params.logprobs)
    // chat with Kimi-K3, or Kimi Linear with tools: every reply is parsed by this format's output
    // parser (reasoning, content, tool calls), from the text with the format's markers kept
    // (thinking: the think channel was opened by the prompt). null: the text is the content.
    const chat::ChatFormat* output_format = nullptr;
    bool thinking = true;
    bool max_tokens_given = false;
    // response_format / structured_outputs / guided_*: the reply's text must follow it (chat:
    // framed by the format into params.structured; completions: params.structured as is).
    std::optional<grammar::Grammar> constraint;
    double grammar_compile_s = 0.0;   // compiling the constraint (and the chat frame)
};

// The sampling defaults of a checkpoint's generation_config.json (vLLM's --generation-config
// auto): used where a request leaves the field out. max_tokens is its max_new_tokens.
struct SamplingDefaults {
    std::optional<double> temperature, top_p, min_p, repetition_penalty;
    std::optional<int64_t> top_k, max_tokens;
    std::string describe() const;   // "temperature 0.6, top_p 0.95", "" when none
};
// The defaults in DIR/generation_config.json (none when there is no such file). Throws
// kimi::Error naming the file for invalid JSON or a value out of range.
SamplingDefaults read_generation_config(const std::string& model_dir);

struct ParseContext {
    const tok::Tokenizer* tok = nullptr;
    std::string served_model_name;
    int32_t max_model_len = 0;
    int32_t vocab_size = 0;
    const chat::ChatFormat* format = nullptr;     // the tokenizer's conversation format
    int32_t max_sequences = 64;                   // n × prompts one request may start (--max-sequences-per-request)
    int64_t max_request_tokens = 1 << 20;         // Σ over its sequences of prompt + max_tokens (--max-request-tokens)
    const MediaLoader* media = nullptr;           // K3 with a vision tower: loads image parts (null: images refused)
    const SamplingDefaults* defaults = nullptr;   // generation_config.json's (null: OpenAI's)
    grammar::CompilePoll poll = {};               // stops a long grammar compile by throwing (empty: never)
    const StoredImages* stored_images = nullptr;               // the images previous_response_id's conversation names
    const std::vector<std::string>* model_aliases = nullptr;   // other names `model` may give
};

// Whether a request's `model` names this server's model: its served name or one of its aliases.
bool serves_model(const std::string& name, const std::string& served, const std::vector<std::string>* aliases);

GenerationJob parse_completion_request(const nlohmann::ordered_json& body, const ParseContext& ctx);
GenerationJob parse_chat_request(const nlohmann::ordered_json& body, const ParseContext& ctx);

// Parses a request body: 400 for invalid JSON or a non-object.
nlohmann::ordered_json parse_body(const std::string& body);

}   // namespace kimi::server
