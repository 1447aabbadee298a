// HttpServer: the OpenAI-compatible HTTP/1.1 server (on HttpListener). It listens before the
// model is loaded (/health answers 503 until set_ready), then serves
//   POST /v1/chat/completions, /v1/completions (SSE streaming or not), /tokenize, /detokenize
//   POST /v1/messages, /v1/messages/count_tokens (the Anthropic Messages API)
//   POST /v1/responses, GET / DELETE /v1/responses/{id} (the OpenAI Responses API)
//   GET  /v1/models, /health, /version, /metrics (Prometheus), / (a short page).
// Every error is OpenAI's error JSON (Anthropic's on /v1/messages*) with a 4xx/5xx status; with
// an API key, /v1/*, /tokenize and /detokenize need "Authorization: Bearer KEY" or "x-api-key: KEY". shutdown() stops accepting,
// lets in-flight requests finish for a grace period, then aborts them. An engine that failed
// for good (a lost MPI rank) makes /health 503 "unhealthy" and generation 503.
#pragma once
#include "chat/chat_format.h"
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "model/config.h"
#include "runtime/engine.h"
#include "runtime/vision_encoder.h"
#include "server/http_listener.h"
#include "server/api_error.h"
#include "server/image_budget.h"
#include "server/openai_generate.h"
#include "server/media_loader.h"
#include "server/openai_request.h"
#include "server/metrics.h"
#include "server/response_store.h"
#include "tokenizer/tokenizer.h"

namespace kimi::server {

inline constexpr const char* kVersion = "0.1.0";

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8000;       // 0: any free port (see port())
    std::string api_key;   // empty: no auth
    std::string served_model_name;
    std::vector<std::string> served_model_aliases;   // other names a request's `model` may give
    int32_t max_sequences_per_request = 64;          // n × prompts of one request (--max-sequences-per-request)
    int64_t max_request_tokens = 1 << 20;            // Σ prompt + max_tokens over its sequences (--max-request-tokens)
    size_t max_body_bytes = 16u << 20;
    int max_connections = 256;           // open at once (streams hold one each); past it: 503
    double request_timeout_s = 30.0;     // a request's head + body must arrive within it
    double keep_alive_timeout_s = 5.0;   // an idle connection closes after it
    double shutdown_grace_s = 5.0;
    int64_t image_memory_bytes = int64_t(4) << 30;   // the images of all requests in flight (--mm-memory)
    std::string precision = "f32";                   // for system_fingerprint (set from the engine when ready)
    // CORS (--allowed-origins): origins a browser page may call from ("*": any); empty: no CORS
    // headers, no preflight (the default).
    std::vector<std::string> allowed_origins;
    SamplingDefaults sampling_defaults;      // generation_config.json's (--generation-config auto)
    int log_level = 1;                       // 0 debug, 1 info (access lines), 2 warning, 3 error (5xx causes)
    bool access_log = true;                  // one line per request at info (--no-access-log: off)
    int64_t responses_store_size = 1000;     // /v1/responses kept for previous_response_id (0: none)
    double responses_store_ttl_s = 3600.0;   // ... and for how long
};

class HttpServer {
public:
    explicit HttpServer(ServerConfig cfg);
    ~HttpServer();

    void start();   // binds (throws kimi::Error) and serves on a background thread
    int port() const { return port_; }
    ListenerStats connections() const { return listener_.stats(); }
    // The model is loaded: generation endpoints open. All three must outlive the server.
    void set_ready(Engine* engine, const tok::Tokenizer* tok, const ModelConfig* model);
    // Images (K3 with its vision tower; before set_ready): the loader of image parts and the
    // encoder of their rows. Both must outlive the server. Without them images are a 400.
    void set_media(const MediaLoader* loader, VisionEncoder* encoder);
    void shutdown();   // idempotent; returns when every connection is done
    ServerMetrics& metrics() { return metrics_; }

private:
    using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
    struct Route {
        std::string method, path;
        Handler handler;
    };
    void routes();
    void handle(const HttpRequest& req, HttpResponse& res);      // pre-routing checks, dispatch, errors
    bool pre_route(const HttpRequest& req, HttpResponse& res);   // true: answered here
    bool cors(const HttpRequest& req, HttpResponse& res);        // true: a preflight, answered here
    void generate(const HttpRequest& req, HttpResponse& res, bool chat);
    void messages(const HttpRequest& req, HttpResponse& res);          // POST /v1/messages
    void responses(const HttpRequest& req, HttpResponse& res);         // POST /v1/responses
    bool stored_response(const HttpRequest& req, HttpResponse& res);   // GET / DELETE /v1/responses/{id}
    void tokenize(const HttpRequest& req, HttpResponse& res);          // POST /tokenize
    void detokenize(const HttpRequest& req, HttpResponse& res);        // POST /detokenize
    // The job's images encoded, its requests submitted to the engine.
    std::shared_ptr<JobRun> submit(GenerationJob parsed, const HttpRequest& req);
    void access_line(const HttpRequest& req, const HttpResponse& res, double seconds) const;
    void stream(HttpResponse& res, std::function<void(const std::function<bool(const std::string&)>&)> body,
                std::function<std::string(const ApiError&)> error_event);
    // req: its hang-up and arrival stop a long grammar compile (ParseContext::poll).
    ParseContext parse_context(const HttpRequest& req, int32_t max_model_len, int64_t max_request_tokens) const;
    // Each prompt's images decoded and encoded into its media spans (encode false: decoded
    // only, to check them), within the image budget, the request's deadline, and only while
    // its client is there.
    void encode_images(GenerationJob& job, const HttpRequest& req, bool encode = true);
    // One log line the first time a request's prompt leaves something out (a server tool
    // nothing here runs): `what` names it, `route` says where.
    void note_left_out(const std::vector<std::string>& what, const char* route);

    ServerConfig cfg_;
    std::vector<Route> routes_;
    HttpListener listener_;
    int port_ = 0;
    std::atomic<bool> ready_{false}, draining_{false}, abort_all_{false};
    Engine* engine_ = nullptr;
    const tok::Tokenizer* tok_ = nullptr;
    std::unique_ptr<chat::ChatFormat> format_;   // the tokenizer's conversation format
    const ModelConfig* model_ = nullptr;
    const MediaLoader* media_ = nullptr;
    VisionEncoder* encoder_ = nullptr;
    ImageBudget image_budget_;
    ResponseStore response_store_;
    ServerMetrics metrics_;
    int64_t started_at_ = 0;
    // A stream's out-of-memory error event and [DONE], made at start: sent when even the error
    // event could not be made.
    std::string out_of_memory_event_;
    std::mutex noted_mu_;
    std::unordered_set<std::string> noted_;   // what note_left_out has said
};

}   // namespace kimi::server
