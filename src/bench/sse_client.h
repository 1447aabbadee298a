// One streaming OpenAI request as `vllm bench serve` measures it: TTFT = arrival of the
// first SSE message with a non-empty `choices` (even if its text is empty), ITL = gaps
// between such messages, E2EL = the last such message; output tokens from the final usage
// chunk (a message without choices), else by counting the text with `count_tokens`.
// ref: vllm/benchmarks/lib/endpoint_request_func.py (async_request_openai_completions).
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/stats.h"

namespace kimi::bench {

struct Endpoint {
    std::string host;
    int port = 80;
    std::string api_key;
    double timeout_s = 6 * 3600;
};

// "http://host:port" (no TLS) → Endpoint; throws kimi::Error if malformed.
Endpoint parse_base_url(const std::string& url);

// POSTs `body` (with "stream": true) to `path` and times the stream. `text` receives the
// generated text. Never throws for HTTP/network failures: success=false and error set.
RequestResult stream_request(const Endpoint& ep, const std::string& path, const nlohmann::ordered_json& body, bool chat,
                             const std::function<int64_t(const std::string&)>& count_tokens, std::string& text);

// GET path → parsed JSON / the body as text (throw kimi::Error on failure).
nlohmann::ordered_json get_json(const Endpoint& ep, const std::string& path);
std::string get_text(const Endpoint& ep, const std::string& path);

}   // namespace kimi::bench

namespace kimi::bench {
// POST path with a JSON body → (HTTP status, parsed body or {"error": text}); status 0 when
// the request itself failed (connection, timeout).
std::pair<int, nlohmann::ordered_json> post_json(const Endpoint& ep, const std::string& path,
                                                 const nlohmann::ordered_json& body);
}   // namespace kimi::bench
