// HttpServer implementation (see http_server.h).
#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <ctime>

#include "core/error.h"
#include "server/api_error.h"
#include "server/openai_generate.h"
#include "server/openai_request.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;

void send_json(httplib::Response& res, int status, const J& j) {
    res.status = status;
    res.set_content(j.dump(-1, ' ', false, J::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, e.to_json()); }

// The body, read through the content reader so the size limit holds for chunked bodies too
// (cpp-httplib 0.11 applies payload_max_length only to Content-Length bodies).
std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, size_t limit) {
    std::string body;
    bool too_big = false;
    const bool ok = reader([&](const char* data, size_t n) {
        if (body.size() + n > limit) {
            too_big = true;
            return false;
        }
        body.append(data, n);
        return true;
    });
    // httplib refuses a Content-Length over payload_max_length before reading anything.
    if (!ok && !too_big && req.has_header("Content-Length")) {
        try {
            too_big = std::stoull(req.get_header_value("Content-Length")) > limit;
        } catch (const std::exception&) {
        }
    }
    if (!ok && !too_big) throw ApiError(400, "the request body could not be read (incomplete or malformed)", "", "bad_body");
    if (too_big) throw ApiError(413, "the request body is larger than " + std::to_string(limit >> 20) + " MiB", "", "body_too_large");
    return body;
}

bool needs_auth(const std::string& path) {
    return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

const char* kIndexPage =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>kimi.cpp</title></head><body>"
    "<h1>kimi.cpp</h1><p>An OpenAI-compatible server for Kimi Linear models.</p><ul>"
    "<li>POST <code>/v1/chat/completions</code>, <code>/v1/completions</code></li>"
    "<li>GET <code>/v1/models</code>, <code>/health</code>, <code>/version</code>, <code>/metrics</code></li>"
    "<li>POST <code>/tokenize</code>, <code>/detokenize</code></li></ul></body></html>\n";

}  // namespace

HttpServer::HttpServer(ServerConfig cfg) : cfg_(std::move(cfg)), http_(std::make_unique<httplib::Server>()) {
    started_at_ = int64_t(std::time(nullptr));
    const int threads = cfg_.http_threads;
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    http_->set_payload_max_length(cfg_.max_body_bytes);
    http_->set_keep_alive_max_count(1000);
    // An idle keep-alive connection holds its worker (and so shutdown) until this expires.
    http_->set_keep_alive_timeout(1);
    routes();
}

HttpServer::~HttpServer() { shutdown(); }

void HttpServer::start() {
    port_ = cfg_.port == 0 ? http_->bind_to_any_port(cfg_.host) : (http_->bind_to_port(cfg_.host, cfg_.port) ? cfg_.port : -1);
    if (port_ <= 0) throw Error("cannot listen on " + cfg_.host + ":" + std::to_string(cfg_.port) + " (in use, or not an address of this machine)");
    listener_ = std::thread([this] { http_->listen_after_bind(); });
    // httplib's stop() does nothing before the accept loop runs, so a shutdown right after start
    // (a model that fails to load at once, an early signal) would wait forever: start returns
    // only once the loop runs (or after 10 s, should it never start).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!http_->is_running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::set_ready(Engine* engine, const tok::Tokenizer* tok, const ModelConfig* model) {
    engine_ = engine;
    tok_ = tok;
    format_ = chat::chat_format_for(*tok);
    cfg_.precision = engine->precision() == Precision::kBF16 ? "bf16" : "f32";   // settled at load (auto)
    model_ = model;
    ready_.store(true);
}

void HttpServer::shutdown() {
    if (draining_.exchange(true)) {
        if (listener_.joinable()) listener_.join();
        return;
    }
    // In-flight requests may finish during the grace period; then whatever runs is aborted.
    std::thread grace([this] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(cfg_.shutdown_grace_s);
        while (std::chrono::steady_clock::now() < until && !stopped_.load())
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        abort_all_.store(true);
    });
    http_->stop();   // closes the listening socket; returns once every handler has finished
    if (listener_.joinable()) listener_.join();
    stopped_.store(true);
    abort_all_.store(true);
    grace.join();
}

void HttpServer::routes() {
    auto& s = *http_;
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        // Content-Length strictly: one run of digits (around it only the whitespace HTTP allows,
        // which the header parser trims). "+18", "18, 18" or "18\0" would be read as 18 by a
        // lenient parse, so framing could disagree with a proxy in front: 400, and the
        // connection closes (its remaining bytes are not a request).
        if (req.has_header("Content-Length")) {
            const std::string v = req.get_header_value("Content-Length");
            const bool digits = !v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos;
            if (!digits || req.get_header_value_count("Content-Length") > 1) {
                res.set_header("Connection", "close");
                send_error(res, ApiError(400, "invalid Content-Length header (one decimal number expected)", "", "invalid_request"));
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        if (!cfg_.api_key.empty() && needs_auth(req.path)) {
            const std::string want = "Bearer " + cfg_.api_key;
            if (req.get_header_value("Authorization") != want) {
                send_error(res, ApiError(401, "Incorrect or missing API key (send \"Authorization: Bearer KEY\")", "",
                                         "invalid_api_key"));
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        const bool always = req.path == "/health" || req.path == "/version" || req.path == "/" || req.path == "/metrics";
        if (!always && !ready_.load()) {
            send_error(res, ApiError(503, "the model is still loading"));
            return httplib::Server::HandlerResponse::Handled;
        }
        if (!always && draining_.load() && req.method == "POST") {
            send_error(res, ApiError(503, "the server is shutting down"));
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        std::string msg;
        switch (res.status) {
            case 404: msg = "no route " + req.method + " " + req.path; break;
            case 413: msg = "the request body is too large"; break;
            case 400: msg = "malformed HTTP request (a POST needs a body with Content-Length or chunked encoding)"; break;
            case 405: msg = "method not allowed"; break;
            default: msg = "HTTP error " + std::to_string(res.status); break;
        }
        send_error(res, ApiError(res.status, msg));
    });
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
            std::rethrow_exception(ep);
        } catch (const ApiError& e) {
            send_error(res, e);
        } catch (const std::bad_alloc&) {
            send_error(res, ApiError(500, "out of memory"));
        } catch (const std::exception& e) {
            send_error(res, ApiError(500, std::string("internal error: ") + e.what()));
        } catch (...) {
            send_error(res, ApiError(500, "internal error"));
        }
    });
    s.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics_.on_http_request(res.status); });

    s.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(kIndexPage, "text/html; charset=utf-8"); });
    s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (ready_.load()) send_json(res, 200, {{"status", "ok"}});
        else send_json(res, 503, {{"status", "loading"}});
    });
    s.Get("/version", [](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, {{"name", "kimi.cpp"}, {"version", kVersion}});
    });
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        EngineSnapshot snap;
        const bool ready = ready_.load();
        if (ready) snap = engine_->snapshot();
        res.set_content(metrics_.render(ready ? &snap : nullptr, ready), "text/plain; version=0.0.4; charset=utf-8");
    });
    s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        J card = {{"id", cfg_.served_model_name},  {"object", "model"}, {"created", started_at_},
                  {"owned_by", "kimi.cpp"},        {"root", cfg_.served_model_name}, {"parent", nullptr},   // never the path on disk
                  {"max_model_len", engine_->max_model_len()}, {"permission", J::array()}};
        send_json(res, 200, {{"object", "list"}, {"data", J::array({card})}});
    });
    s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        const J b = parse_body(read_body(req, reader, cfg_.max_body_bytes));
        if (b.contains("model") && !b["model"].is_null() && b["model"] != cfg_.served_model_name)
            throw ApiError(404, "The model does not exist; this server serves `" + cfg_.served_model_name + "`.", "model",
                           "model_not_found");
        std::vector<int32_t> ids;
        if (b.contains("messages")) {
            J chat = b;
            chat["max_tokens"] = 1;
            chat.erase("stream");
            ParseContext pc{tok_, cfg_.served_model_name, std::numeric_limits<int32_t>::max(), int32_t(model_->vocab_size), format_.get(),
                            cfg_.max_sequences_per_request};
            ids = parse_chat_request(chat, pc).prompts[0].ids;
        } else {
            if (!b.contains("prompt") || !b["prompt"].is_string()) throw bad_param("prompt", "prompt must be a string");
            ids = tok_->encode(b["prompt"].get<std::string>(), true);
        }
        send_json(res, 200, {{"count", ids.size()}, {"max_model_len", engine_->max_model_len()}, {"tokens", ids},
                             {"token_strs", nullptr}});
    });
    s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        const J b = parse_body(read_body(req, reader, cfg_.max_body_bytes));
        if (!b.contains("tokens") || !b["tokens"].is_array()) throw bad_param("tokens", "tokens must be an array of token ids");
        std::vector<int32_t> ids;
        for (const auto& v : b["tokens"]) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok_->n_vocab())
                throw bad_param("tokens", "tokens must be token ids in [0, " + std::to_string(tok_->n_vocab()) + ")");
            ids.push_back(v.get<int32_t>());
        }
        send_json(res, 200, {{"prompt", tok_->decode_lossy(ids)}});
    });
    auto generate = [this](Endpoint ep) {
        return [this, ep](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
            const J b = parse_body(read_body(req, reader, cfg_.max_body_bytes));
            const ParseContext pc{tok_, cfg_.served_model_name, engine_->max_model_len(), int32_t(model_->vocab_size), format_.get(),
                                  cfg_.max_sequences_per_request};
            auto job = std::make_shared<GenerationJob>(ep == Endpoint::kChat ? parse_chat_request(b, pc)
                                                                              : parse_completion_request(b, pc));
            if (job->params.structured) metrics_.on_grammar_compiled(job->grammar_compile_s);
            GenerateContext gc{*engine_, *tok_, metrics_, std::string("fp_kimi_cpp_") + kVersion + "_" + cfg_.precision, &abort_all_};
            if (!job->stream) {
                send_json(res, 200, run_job(*job, gc));
                return;
            }
            res.set_header("Cache-Control", "no-cache");
            res.set_header("X-Accel-Buffering", "no");
            res.set_chunked_content_provider("text/event-stream", [job, gc](size_t, httplib::DataSink& sink) mutable {
                auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
                bool ok = false;
                try {
                    ok = run_job_streaming(*job, gc, write);
                } catch (const ApiError& e) {
                    ok = write("data: " + e.to_json().dump() + "\n\ndata: [DONE]\n\n");
                }
                if (ok) sink.done();
                return ok;
            });
        };
    };
    s.Post("/v1/completions", generate(Endpoint::kCompletions));
    s.Post("/v1/chat/completions", generate(Endpoint::kChat));
}

}  // namespace kimi::server
