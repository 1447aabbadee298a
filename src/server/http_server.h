// HttpServer: the OpenAI-compatible HTTP/1.1 server (cpp-httplib). It listens before the
// model is loaded (/health answers 503 until set_ready), then serves
//   POST /v1/chat/completions, /v1/completions (SSE streaming or not), /tokenize, /detokenize
//   GET  /v1/models, /health, /version, /metrics (Prometheus), / (a short page).
// Every error is OpenAI's error JSON with a 4xx/5xx status; with an API key, /v1/*,
// /tokenize and /detokenize need "Authorization: Bearer KEY". shutdown() stops accepting,
// lets in-flight requests finish for a grace period, then aborts them.
#pragma once
#include "chat/chat_format.h"
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "model/config.h"
#include "runtime/engine.h"
#include "server/metrics.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace kimi::server {

inline constexpr const char* kVersion = "0.1.0";

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8000;                       // 0: any free port (see port())
    std::string api_key;                   // empty: no auth
    std::string served_model_name;
    int32_t max_sequences_per_request = 64;   // n × prompts of one request (--max-sequences-per-request)
    size_t max_body_bytes = 16u << 20;
    int http_threads = 64;                 // concurrent connections served (streams hold one each)
    double shutdown_grace_s = 5.0;
    std::string precision = "f32";         // for system_fingerprint (set from the engine when ready)
};

class HttpServer {
public:
    explicit HttpServer(ServerConfig cfg);
    ~HttpServer();

    void start();                          // binds (throws kimi::Error) and serves on a background thread
    int port() const { return port_; }
    // The model is loaded: generation endpoints open. All three must outlive the server.
    void set_ready(Engine* engine, const tok::Tokenizer* tok, const ModelConfig* model);
    void shutdown();                       // idempotent; returns when every connection is done
    ServerMetrics& metrics() { return metrics_; }

private:
    void routes();

    ServerConfig cfg_;
    std::unique_ptr<httplib::Server> http_;
    std::thread listener_;
    int port_ = 0;
    std::atomic<bool> ready_{false}, draining_{false}, abort_all_{false}, stopped_{false};
    Engine* engine_ = nullptr;
    const tok::Tokenizer* tok_ = nullptr;
    std::unique_ptr<chat::ChatFormat> format_;   // the tokenizer's conversation format
    const ModelConfig* model_ = nullptr;
    ServerMetrics metrics_;
    int64_t started_at_ = 0;
};

}  // namespace kimi::server
