// HttpServer implementation (see http_server.h): routes and their checks; the sockets are
// HttpListener's.
#include "server/http_server.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/human_bytes.h"
#include "server/anthropic_reply.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/log_text.h"
#include "server/openai_generate.h"
#include "server/responses_reply.h"
#include "server/responses_request.h"
#include "server/openai_request.h"
#include "server/web_assets.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;

void send_json(HttpResponse& res, int status, const J& j) {
    res.status = status;
    res.set_content(j.dump(-1, ' ', false, J::error_handler_t::replace), "application/json");
}

// The Anthropic Messages routes answer errors in Anthropic's shape, every other route in OpenAI's.
bool anthropic_route(const std::string& path) { return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0; }

void send_error(HttpResponse& res, const ApiError& e, const std::string& path) {
    send_json(res, e.status, anthropic_route(path) ? e.to_anthropic_json() : e.to_json());
}

bool needs_auth(const std::string& path) {
    return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

bool equals_nocase(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(uint8_t(a[i])) != std::tolower(uint8_t(b[i]))) return false;
    return true;
}

// Whether `given` equals `key`, in time that depends on given's length only: every byte of
// `given` is compared (with the key's bytes, cycled), nothing exits early, and a length
// difference is folded into the same flag. So the time tells a guesser nothing about the key.
bool same_secret(std::string_view given, std::string_view key) {
    if (key.empty()) return false;
    volatile uint8_t diff = given.size() == key.size() ? 0 : 1;
    for (size_t i = 0; i < given.size(); ++i) diff = diff | uint8_t(given[i] ^ key[i % key.size()]);
    return diff == 0;
}

// The token of "Authorization: Bearer TOKEN": the scheme is case-insensitive (RFC 9110 11.1),
// one or more spaces follow it. nullopt for another scheme or none.
std::optional<std::string_view> bearer_token(std::string_view v) {
    size_t i = 0;
    while (i < v.size() && !is_space(v[i])) ++i;
    if (!equals_nocase(v.substr(0, i), "bearer") || i == v.size()) return std::nullopt;
    while (i < v.size() && is_space(v[i])) ++i;
    size_t end = v.size();
    while (end > i && is_space(v[end - 1])) --end;
    return v.substr(i, end - i);
}

// Whether a Content-Type names JSON: the media type application/json in any case, with or
// without parameters ("; charset=utf-8").
bool is_json_media_type(std::string_view v) {
    v = v.substr(0, std::min(v.find(';'), v.size()));
    while (!v.empty() && is_space(v.front())) v.remove_prefix(1);
    while (!v.empty() && is_space(v.back())) v.remove_suffix(1);
    return equals_nocase(v, "application/json");
}

// An embedded file of the page, with the headers every one gets.
void send_asset(HttpResponse& res, const WebAsset& a) {
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(reinterpret_cast<const char*>(a.data), a.size), a.content_type);
}

// The access log's figures of a generation, from its job.
void tally(AccessInfo& a, JobRun& run, double arrived_s) {
    const JobTally t = job_tally(run);
    a.prompt_tokens = t.prompt_tokens;
    a.cached_tokens = t.cached_tokens;
    a.completion_tokens = t.completion_tokens;
    a.ttft_s = t.t_first >= 0 ? t.t_first - arrived_s : -1.0;
}

ListenerConfig listener_config(const ServerConfig& c) {
    ListenerConfig l;
    l.host = c.host;
    l.port = c.port;
    l.max_connections = c.max_connections;
    l.request_timeout_s = c.request_timeout_s;
    l.keep_alive_timeout_s = c.keep_alive_timeout_s;
    l.limits.max_body_bytes = c.max_body_bytes;
    l.out_of_memory_body = out_of_memory().to_json().dump();
    return l;
}

}   // namespace

HttpServer::HttpServer(ServerConfig cfg)
    : cfg_(std::move(cfg)),
      listener_(
          listener_config(cfg_), [this](const HttpRequest& req, HttpResponse& res) { handle(req, res); },
          [](int status, const std::string& message) {
              return ApiError(status, message, "", status == 408 ? "request_timeout" : "").to_json().dump();
          },
          [this](int status) { metrics_.on_http_request(status); }),
      image_budget_(cfg_.image_memory_bytes),
      response_store_(cfg_.responses_store_size, cfg_.responses_store_ttl_s) {
    started_at_ = int64_t(std::time(nullptr));
    out_of_memory_event_ = "data: " + out_of_memory().to_json().dump() + "\n\ndata: [DONE]\n\n";
    listener_.set_on_done(
        [this](const HttpRequest& req, const HttpResponse& res, double s) { access_line(req, res, s); });
    routes();
}

HttpServer::~HttpServer() { shutdown(); }

// One line per request on stderr (info, unless --no-access-log): UTC time, method, route,
// status; for generations the prompt / cached / completion tokens, the time to the first
// token, the generation speed after it; the duration. A 5xx is logged with its cause at error.
void HttpServer::access_line(const HttpRequest& req, const HttpResponse& res, double seconds) const {
    const AccessInfo& a = *res.access;
    const bool failed = res.status >= 500 || !a.error.empty();
    if (!(failed && cfg_.log_level <= 3) && !(cfg_.access_log && cfg_.log_level <= 1)) return;
    if (req.path == "/health" && !failed && cfg_.log_level > 0) return;   // probes: only at debug
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    // the client's bytes escaped: a path or an error's text never starts a line of its own
    std::string line = std::string(failed ? "error: " : "access: ") + when + " " + log_text(req.method, 20) + " " +
        log_text(req.path, 200) + " " + std::to_string(res.status);
    char buf[160];
    if (a.prompt_tokens >= 0) {
        const double gen_s = a.ttft_s >= 0 ? seconds - a.ttft_s : 0.0;
        std::snprintf(buf, sizeof buf, " prompt=%lld cached=%lld completion=%lld", (long long)a.prompt_tokens,
                      (long long)a.cached_tokens, (long long)a.completion_tokens);
        line += buf;
        if (a.ttft_s >= 0) {
            std::snprintf(buf, sizeof buf, " ttft=%.3fs", a.ttft_s);
            line += buf;
        }
        if (a.completion_tokens > 1 && gen_s > 0) {
            std::snprintf(buf, sizeof buf, " %.1f tok/s", double(a.completion_tokens - 1) / gen_s);
            line += buf;
        }
    }
    std::snprintf(buf, sizeof buf, " %.3fs", seconds);
    line += buf;
    if (failed) line += " cause: " + (a.error.empty() ? std::string("(none recorded)") : log_text(a.error, 500));
    std::fprintf(stderr, "%s\n", line.c_str());
}

void HttpServer::start() {
    port_ = listener_.bind();
    listener_.start();
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
    draining_.store(true);
    // In-flight requests may finish during the grace period; then whatever runs is aborted.
    listener_.stop(cfg_.shutdown_grace_s, [this] { abort_all_.store(true); });
    abort_all_.store(true);
}

// CORS, as vLLM's middleware does it, when --allowed-origins names origins: a request from an
// allowed Origin gets Access-Control-Allow-Origin (and Vary: Origin); a preflight (OPTIONS with
// Access-Control-Request-Method) is answered here, before auth, 200 for an allowed origin and
// 400 for another. Without the flag nothing changes: no headers, OPTIONS is not a route.
bool HttpServer::cors(const HttpRequest& req, HttpResponse& res) {
    if (cfg_.allowed_origins.empty() || !req.has_header("Origin")) return false;
    const std::string origin = req.header("Origin");
    const bool any =
        std::find(cfg_.allowed_origins.begin(), cfg_.allowed_origins.end(), "*") != cfg_.allowed_origins.end();
    const bool allowed = any ||
        std::find(cfg_.allowed_origins.begin(), cfg_.allowed_origins.end(), origin) != cfg_.allowed_origins.end();
    const bool preflight = req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method");
    if (allowed) {
        res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
        if (!any) res.set_header("Vary", "Origin");
    }
    if (!preflight) return false;
    if (!allowed) {
        res.status = 400;
        res.set_content("Disallowed CORS origin", "text/plain; charset=utf-8");
        return true;
    }
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    const std::string want = req.header("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers", want.empty() ? "*" : want);
    res.set_header("Access-Control-Max-Age", "600");
    res.status = 200;
    res.set_content("OK", "text/plain; charset=utf-8");
    return true;
}

bool HttpServer::pre_route(const HttpRequest& req, HttpResponse& res) {
    if (cors(req, res)) return true;
    if (!cfg_.api_key.empty() && needs_auth(req.path)) {
        // "Authorization: Bearer KEY" (OpenAI's clients) or "x-api-key: KEY" (Anthropic's)
        const std::string auth = req.header("Authorization"), x_key = req.header("x-api-key");
        const std::optional<std::string_view> token = auth.empty() && !x_key.empty()
            ? std::optional<std::string_view>(x_key)
            : bearer_token(auth);   // the token is a view of one of them
        if (!token || !same_secret(*token, cfg_.api_key)) {
            send_error(res,
                       ApiError(401,
                                "Incorrect or missing API key (send \"Authorization: Bearer KEY\" or \"x-api-key: "
                                "KEY\")",
                                "", "invalid_api_key"),
                       req.path);
            return true;
        }
    }
    // why: a body a browser may send cross-site without a CORS preflight (text/plain, a form)
    // never reaches a handler; every POST route reads JSON.
    const auto is_post_route = [&req](const Route& r) { return r.method == "POST" && r.path == req.path; };
    if (req.method == "POST" && std::any_of(routes_.begin(), routes_.end(), is_post_route)) {
        const std::string type = req.header("Content-Type");
        if (!is_json_media_type(type)) {
            const std::string why = type.empty() ? "the request has no Content-Type"
                                                 : "unsupported Content-Type '" + type.substr(0, 200) + "'";
            send_error(res,
                       ApiError(415, why + ": send \"Content-Type: application/json\"", "", "unsupported_media_type"),
                       req.path);
            return true;
        }
    }
    const bool always = req.path == "/health" || req.path == "/version" || req.path == "/" || req.path == "/metrics" ||
        req.path.rfind("/web/", 0) == 0;   // the page and its files, also while loading
    if (!always && !ready_.load()) {
        send_error(res, ApiError(503, "the model is still loading"), req.path);
        return true;
    }
    if (!always && draining_.load() && req.method == "POST") {
        send_error(res, ApiError(503, "the server is shutting down"), req.path);
        return true;
    }
    return false;
}

void HttpServer::handle(const HttpRequest& req, HttpResponse& res) {
    try {
        if (pre_route(req, res)) return;
        if (req.path.rfind("/web/", 0) == 0 && (req.method == "GET" || req.method == "HEAD")) {
            const WebAsset* a = find_web_asset(req.path);
            if (!a) throw ApiError(404, "no route " + req.method + " " + req.path);
            return send_asset(res, *a);
        }
        if (stored_response(req, res)) return;
        std::string allow;
        for (const Route& r : routes_) {
            if (r.path != req.path) continue;
            if (r.method == req.method || (r.method == "GET" && req.method == "HEAD")) return r.handler(req, res);
            allow += (allow.empty() ? "" : ", ") + r.method;
        }
        if (allow.empty()) throw ApiError(404, "no route " + req.method + " " + req.path);
        res.set_header("Allow", allow);
        throw ApiError(405, "method " + req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")");
    } catch (const ApiError& e) {
        res.stream = nullptr;
        if (e.status >= 500) res.access->error = e.what();
        send_error(res, e, req.path);
    } catch (const std::bad_alloc&) {
        res.stream = nullptr;
        res.access->error = "out of memory";
        send_error(res, out_of_memory(), req.path);
    } catch (const std::exception& e) {
        res.stream = nullptr;
        res.access->error = std::string("internal error: ") + e.what();
        send_error(res, ApiError(500, res.access->error), req.path);
    }
}

void HttpServer::note_left_out(const std::vector<std::string>& what, const char* route) {
    if (what.empty() || cfg_.log_level > 1) return;
    std::lock_guard<std::mutex> lock(noted_mu_);
    for (const std::string& w : what)
        if (noted_.size() < 1024 && noted_.insert(w).second)
            std::fprintf(stderr,
                         "note: %s: the tool %s runs on the provider's servers, not here: left out of the prompt\n",
                         route, log_text(w, 200).c_str());
}

ParseContext HttpServer::parse_context(const HttpRequest& req, int32_t max_model_len,
                                       int64_t max_request_tokens) const {
    ParseContext pc{tok_,          cfg_.served_model_name,         max_model_len,     int32_t(model_->vocab_size),
                    format_.get(), cfg_.max_sequences_per_request, max_request_tokens};
    pc.media = media_;
    pc.defaults = &cfg_.sampling_defaults;
    pc.model_aliases = &cfg_.served_model_aliases;
    // A grammar compile stops when the client hangs up, the server shuts down or the request
    // has run past --request-timeout (the time an encode of its images gets too).
    pc.poll = [this, &req] {
        if (abort_all_.load()) throw ApiError(503, "the server is shutting down");
        if (req.client_gone && req.client_gone())
            throw ApiError(499, "the client went away while its request's grammar compiled");
        const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
        if (now - req.arrived_s > cfg_.request_timeout_s)
            throw ApiError(408, "compiling the request's grammar took longer than --request-timeout", "",
                           "request_timeout");
    };
    return pc;
}

void HttpServer::set_media(const MediaLoader* loader, VisionEncoder* encoder) {
    media_ = loader;
    encoder_ = encoder;
}

// Each prompt's images, decoded and encoded (or taken from the encoder cache) into the rows
// their <|media_pad|> tokens get (encode false: decoded and prepared only, as count_tokens
// checks them, so it counts only what /v1/messages would take). The request's share of the image budget is taken before any
// pixel is decoded; the encodes stop between tower blocks once the client is gone, the server
// shuts down or --request-timeout has passed since the request arrived.
void HttpServer::encode_images(GenerationJob& job, const HttpRequest& req, bool encode) {
    int64_t need = 0;
    for (const PromptInput& p : job.prompts)
        for (const PendingImage& img : p.images) need += img.memory;
    if (need == 0) return;
    KIMI_CHECK(encoder_ != nullptr && media_ != nullptr, "images without an encoder");
    VisionEncoder::Control ctl;
    ctl.deadline = std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(cfg_.request_timeout_s));
    ctl.cancelled = [this, &req] { return abort_all_.load() || (req.client_gone && req.client_gone()); };
    if (need > image_budget_.total())
        throw ApiError(400,
                       "decoding this request's images needs " + human_bytes(need) +
                           ", more than the server's image memory of " + human_bytes(image_budget_.total()) +
                           " (--mm-memory)",
                       "messages", "invalid_image");
    bool waited = false;
    const auto t_wait = std::chrono::steady_clock::now();
    const ImageBudget::Lease lease = image_budget_.acquire(need, ctl.deadline, ctl.cancelled, &waited);
    if (waited)
        metrics_.on_image_memory_wait(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count());
    if (!lease) {
        if (ctl.cancelled()) throw ApiError(499, "the client went away while its request waited for image memory");
        throw ApiError(503,
                       "other requests' images hold the server's image memory (--mm-memory " +
                           human_bytes(image_budget_.total()) + "); retry later",
                       "", "image_memory_busy");
    }
    for (PromptInput& p : job.prompts) {
        if (p.images.empty()) continue;
        try {
            std::vector<PromptImage> ready;
            ready.reserve(p.images.size());
            for (const PendingImage& img : p.images) {
                if (ctl.cancelled()) throw EncodeStopped("the client went away", false);
                ready.push_back(media_->load(img));
                if (!encode) ready.clear();   // checked: its pixels are not needed
            }
            p.images = {};   // the encoded bytes are not needed any more
            if (encode) p.media = encoder_->encode_prompt(p.ids, ready, ctl);
        } catch (const EncodeStopped& e) {
            if (e.timed_out) throw ApiError(408, e.what(), "", "request_timeout");
            throw ApiError(499, e.what());
        } catch (const Error& e) {   // ImageError included
            throw ApiError(400, e.what(), "messages", "invalid_image");
        }
    }
}

std::shared_ptr<JobRun> HttpServer::submit(GenerationJob parsed, const HttpRequest& req) {
    encode_images(parsed, req);
    auto job = std::make_shared<const GenerationJob>(std::move(parsed));
    if (job->params.structured) metrics_.on_grammar_compiled(job->grammar_compile_s);
    const GenerateContext gc{*engine_, *tok_, metrics_, std::string("fp_kimi_cpp_") + kVersion + "_" + cfg_.precision,
                             &abort_all_};
    return start_job(job, gc);   // submitted before any byte goes out: a refusal keeps its status
}

// The response as a stream of server-sent events written by `body`; an error once the head went
// out with 200 is an event of the stream (`error_event`), and memory running out the prebuilt
// one.
void HttpServer::stream(HttpResponse& res, std::function<void(const std::function<bool(const std::string&)>&)> body,
                        std::function<std::string(const ApiError&)> error_event) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.content_type = "text/event-stream";
    res.stream = [body = std::move(body), error_event = std::move(error_event), access = res.access,
                  this](const std::function<bool(std::string_view)>& write) {
        auto put = [&write](const std::string& s) { return write(s); };
        try {
            try {
                body(put);
            } catch (const ApiError& e) {   // the status went out as 200: the cause is logged all the same
                access->error = std::to_string(e.status) + " in the stream: " + e.what();
                put(error_event(e));
            } catch (const std::bad_alloc&) {
                throw;
            } catch (const std::exception& e) {
                access->error = std::string("500 in the stream: internal error: ") + e.what();
                put(error_event(ApiError(500, std::string("internal error: ") + e.what())));
            }
        } catch (const std::bad_alloc&) {   // memory ran out, maybe while another error was answered
            write(out_of_memory_event_);
        }
    };
}

void HttpServer::generate(const HttpRequest& req, HttpResponse& res, bool chat) {
    const J b = parse_body(req.body);
    const ParseContext pc = parse_context(req, engine_->max_model_len(), cfg_.max_request_tokens);
    GenerationJob parsed = chat ? parse_chat_request(b, pc) : parse_completion_request(b, pc);
    const bool streamed = parsed.stream;
    std::shared_ptr<JobRun> run = submit(std::move(parsed), req);
    if (!streamed) {
        const J body = run_job(*run);
        tally(*res.access, *run, req.arrived_s);
        return send_json(res, 200, body);
    }
    stream(
        res,
        [run, access = res.access, arrived = req.arrived_s](const auto& put) {
            run_job_streaming(*run, put);
            tally(*access, *run, arrived);
        },
        [](const ApiError& e) { return "data: " + e.to_json().dump() + "\n\ndata: [DONE]\n\n"; });
}

// POST /v1/messages: the Anthropic Messages API on the chat path (anthropic_request.h).
void HttpServer::messages(const HttpRequest& req, HttpResponse& res) {
    MessagesRequest mr = messages_to_chat(parse_body(req.body), false);
    note_left_out(mr.left_out, "/v1/messages");
    const ParseContext pc = parse_context(req, engine_->max_model_len(), cfg_.max_request_tokens);
    GenerationJob parsed = parse_chat_request(mr.chat, pc);
    const int64_t prompt_tokens = int64_t(parsed.prompts.at(0).ids.size());
    std::shared_ptr<JobRun> run = submit(std::move(parsed), req);
    if (!mr.stream) {
        MessagesReply reply(cfg_.served_model_name, std::move(mr.stop_sequences));
        const auto outcome = run_chat_pieces(
            *run, [&reply](const chat::Delta& d) { return reply.add(d); }, nullptr);
        tally(*res.access, *run, req.arrived_s);
        return send_json(res, 200, reply.message(*outcome));
    }
    stream(
        res,
        [run, prompt_tokens, model = cfg_.served_model_name, stops = std::move(mr.stop_sequences), access = res.access,
         arrived = req.arrived_s](const auto& put) {
            MessagesReply reply(model, stops, put);
            if (!reply.start(prompt_tokens)) return;
            // message_start with the first piece: the engine has told the cached tokens by then
            const auto outcome = run_chat_pieces(
                *run,
                [&reply, &run](const chat::Delta& d) {
                    return (reply.begun() || reply.begin(job_tally(*run).cached_tokens)) && reply.add(d);
                },
                [&reply] { return reply.ping(); });
            tally(*access, *run, arrived);
            if (outcome) reply.finish(*outcome);
        },
        [](const ApiError& e) { return MessagesReply::error_event(e); });
}

// POST /v1/responses: the OpenAI Responses API on the chat path (responses_request.h), with the
// conversation of previous_response_id from the store and this one stored unless store is false.
// The stored conversation counts toward --max-body-mb as if the client had sent it (its images
// as base64), so continuing a chain costs no more than one request could: a chain that would
// pass the limit is refused (413), and no stored conversation outgrows it.
void HttpServer::responses(const HttpRequest& req, HttpResponse& res) {
    const J b = parse_body(req.body);
    static const J no_previous = nullptr;
    std::optional<StoredResponse> previous;
    if (const auto prev = previous_response_id(b)) {
        previous = response_store_.get(*prev);
        if (!previous)
            throw ApiError(404, "Previous response with id '" + prev->substr(0, 100) + "' not found.",
                           "previous_response_id", "previous_response_not_found");
        const int64_t total = previous->body_bytes + int64_t(req.body.size());
        if (total > int64_t(cfg_.max_body_bytes))
            throw ApiError(413,
                           "the conversation of previous_response_id and this request come to " + human_bytes(total) +
                               " (stored images counted as the base64 a client sends), more than the server's "
                               "request limit of " +
                               human_bytes(int64_t(cfg_.max_body_bytes)) +
                               " (--max-body-mb): start a new conversation, or send it whole",
                           "previous_response_id", "request_too_large");
    }
    ResponsesRequest rr = responses_to_chat(b, previous ? *previous->messages : no_previous);
    note_left_out(rr.left_out, "/v1/responses");
    ParseContext pc = parse_context(req, engine_->max_model_len(), cfg_.max_request_tokens);
    std::shared_ptr<const StoredImages> known = previous ? previous->images : nullptr;
    pc.stored_images = known.get();
    std::shared_ptr<JobRun> run = submit(parse_chat_request(rr.chat, pc), req);
    auto keep = [this, known](ResponsesRequest& r, const ResponsesReply& reply, const J& response) {
        if (!r.store) return;
        J messages = std::move(r.conversation);
        for (J& m : reply.as_chat_messages()) messages.push_back(std::move(m));
        response_store_.put(reply.id(), stored_conversation(std::move(messages), response, known.get()));
    };
    if (!rr.stream) {
        ResponsesReply reply(cfg_.served_model_name, rr.echo);
        reply.set_encrypted_reasoning(rr.encrypted_reasoning);
        reply.set_custom_tools(rr.custom_tools);
        const auto outcome = run_chat_pieces(
            *run, [&reply](const chat::Delta& d) { return reply.add(d); }, nullptr);
        const J response = reply.response(*outcome);
        keep(rr, reply, response);
        tally(*res.access, *run, req.arrived_s);
        return send_json(res, 200, response);
    }
    stream(
        res,
        [run, model = cfg_.served_model_name, rr = std::move(rr), keep, access = res.access,
         arrived = req.arrived_s](const auto& put) mutable {
            ResponsesReply reply(model, rr.echo, put);
            reply.set_encrypted_reasoning(rr.encrypted_reasoning);
            reply.set_custom_tools(rr.custom_tools);
            if (!reply.start()) return;
            const auto outcome = run_chat_pieces(
                *run, [&reply](const chat::Delta& d) { return reply.add(d); },
                [&put] { return put(": keep-alive\n\n"); });
            tally(*access, *run, arrived);
            if (!outcome) return;
            keep(rr, reply, reply.response(*outcome));
            reply.finish(*outcome);
        },
        [](const ApiError& e) { return ResponsesReply::error_event(e); });
}

bool HttpServer::stored_response(const HttpRequest& req, HttpResponse& res) {
    static const std::string prefix = "/v1/responses/";
    if (req.path.rfind(prefix, 0) != 0 || req.path.size() == prefix.size()) return false;
    const std::string id = req.path.substr(prefix.size());
    if (req.method == "DELETE") {
        if (!response_store_.erase(id))
            throw ApiError(404, "Response with id '" + id.substr(0, 100) + "' not found.", "response_id", "not_found");
        send_json(res, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
        return true;
    }
    if (req.method != "GET" && req.method != "HEAD") {
        res.set_header("Allow", "GET, DELETE");
        throw ApiError(405, "method " + req.method + " is not allowed on " + req.path + " (allowed: GET, DELETE)");
    }
    const std::optional<StoredResponse> s = response_store_.get(id);
    if (!s) throw ApiError(404, "Response with id '" + id.substr(0, 100) + "' not found.", "response_id", "not_found");
    send_json(res, 200, *s->response);
    return true;
}

// POST /tokenize: a prompt, or a chat's messages as the chat route would render them.
void HttpServer::tokenize(const HttpRequest& req, HttpResponse& res) {
    const J b = parse_body(req.body);
    if (b.contains("model") && !b["model"].is_null() &&
        !(b["model"].is_string() &&
          serves_model(b["model"].get_ref<const std::string&>(), cfg_.served_model_name, &cfg_.served_model_aliases)))
        throw ApiError(404, "The model does not exist; this server serves `" + cfg_.served_model_name + "`.", "model",
                       "model_not_found");
    std::vector<int32_t> ids;
    if (b.contains("messages")) {
        J chat = b;
        chat["max_tokens"] = 1;
        chat.erase("stream");
        const ParseContext pc =
            parse_context(req, std::numeric_limits<int32_t>::max(), std::numeric_limits<int64_t>::max());
        ids = parse_chat_request(chat, pc).prompts[0].ids;   // image parts: their pad tokens too
    } else {
        if (!b.contains("prompt") || !b["prompt"].is_string()) throw bad_param("prompt", "prompt must be a string");
        ids = tok_->encode(b["prompt"].get<std::string>(), true);
    }
    send_json(
        res, 200,
        {{"count", ids.size()}, {"max_model_len", engine_->max_model_len()}, {"tokens", ids}, {"token_strs", nullptr}});
}

// POST /detokenize: token ids back to text.
void HttpServer::detokenize(const HttpRequest& req, HttpResponse& res) {
    const J b = parse_body(req.body);
    if (!b.contains("tokens") || !b["tokens"].is_array())
        throw bad_param("tokens", "tokens must be an array of token ids");
    std::vector<int32_t> ids;
    for (const auto& v : b["tokens"]) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok_->n_vocab())
            throw bad_param("tokens", "tokens must be token ids in [0, " + std::to_string(tok_->n_vocab()) + ")");
        ids.push_back(v.get<int32_t>());
    }
    send_json(res, 200, {{"prompt", tok_->decode_lossy(ids)}});
}

void HttpServer::routes() {
    auto on = [this](const char* method, const char* path, Handler h) {
        routes_.push_back({method, path, std::move(h)});
    };
    on("GET", "/", [](const HttpRequest&, HttpResponse& res) {   // the chat page
        const WebAsset* page = find_web_asset("/web/index.html");
        KIMI_CHECK(page != nullptr, "the page is not embedded");
        send_asset(res, *page);
    });
    on("GET", "/health", [this](const HttpRequest&, HttpResponse& res) {
        if (!ready_.load()) return send_json(res, 503, {{"status", "loading"}});
        const std::string failure = engine_->failure();
        if (!failure.empty()) return send_json(res, 503, {{"status", "unhealthy"}, {"error", failure}});
        send_json(res, 200, {{"status", "ok"}});
    });
    on("GET", "/version", [](const HttpRequest&, HttpResponse& res) {
        send_json(res, 200, {{"name", "kimi.cpp"}, {"version", kVersion}});
    });
    on("GET", "/metrics", [this](const HttpRequest&, HttpResponse& res) {
        EngineSnapshot snap;
        const bool ready = ready_.load();
        if (ready) snap = engine_->snapshot();
        const VisionEncoder::Stats vision = encoder_ ? encoder_->stats() : VisionEncoder::Stats{};
        res.set_content(
            metrics_.render(ready ? &snap : nullptr, ready, listener_.stats(), encoder_ ? &vision : nullptr),
            "text/plain; version=0.0.4; charset=utf-8");
    });
    on("GET", "/v1/models", [this](const HttpRequest&, HttpResponse& res) {
        J cards = J::array();   // one card per name, as vLLM lists its served names
        std::vector<std::string> names = {cfg_.served_model_name};
        names.insert(names.end(), cfg_.served_model_aliases.begin(), cfg_.served_model_aliases.end());
        for (const std::string& name : names)
            cards.push_back({{"id", name},
                             {"object", "model"},
                             {"created", started_at_},
                             {"owned_by", "kimi.cpp"},
                             {"root", cfg_.served_model_name},
                             {"parent", nullptr},   // never the path on disk
                             {"max_model_len", engine_->max_model_len()},
                             {"permission", J::array()}});
        send_json(res, 200, {{"object", "list"}, {"data", std::move(cards)}});
    });
    on("POST", "/tokenize", [this](const HttpRequest& req, HttpResponse& res) { tokenize(req, res); });
    on("POST", "/detokenize", [this](const HttpRequest& req, HttpResponse& res) { detokenize(req, res); });
    on("POST", "/v1/completions", [this](const HttpRequest& req, HttpResponse& res) { generate(req, res, false); });
    on("POST", "/v1/chat/completions", [this](const HttpRequest& req, HttpResponse& res) { generate(req, res, true); });
    on("POST", "/v1/messages", [this](const HttpRequest& req, HttpResponse& res) { messages(req, res); });
    on("POST", "/v1/responses", [this](const HttpRequest& req, HttpResponse& res) { responses(req, res); });
    on("POST", "/v1/messages/count_tokens", [this](const HttpRequest& req, HttpResponse& res) {
        const MessagesRequest mr = messages_to_chat(parse_body(req.body), true);
        J chat = mr.chat;
        chat["max_tokens"] = 1;   // the prompt alone is counted
        const ParseContext pc =
            parse_context(req, std::numeric_limits<int32_t>::max(), std::numeric_limits<int64_t>::max());
        GenerationJob job = parse_chat_request(chat, pc);
        const size_t n = job.prompts.at(0).ids.size();
        encode_images(job, req, false);   // an image /v1/messages would refuse is refused here too
        send_json(res, 200, {{"input_tokens", n}});
    });
}

}   // namespace kimi::server
