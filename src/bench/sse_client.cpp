// Streaming OpenAI client for the serving benchmark (see sse_client.h).
#include "bench/sse_client.h"

#include <httplib.h>

#include <chrono>

#include "core/error.h"

namespace kimi::bench {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The text of a streamed choice: its delta's content (chat) or its text (completions).
void append_choice_text(const nlohmann::ordered_json& c0, bool chat, std::string& text) {
    if (chat) {
        if (c0.contains("delta") && c0["delta"].contains("content") && c0["delta"]["content"].is_string())
            text += c0["delta"]["content"].get<std::string>();
    } else if (c0.contains("text") && c0["text"].is_string()) {
        text += c0["text"].get<std::string>();
    }
}

// Each complete line of the SSE stream in `buf` taken out of it; the data of a "data:" line goes
// to on_data. A line not yet ended stays in `buf`.
void take_data_lines(std::string& buf, const std::function<void(const std::string&)>& on_data) {
    size_t pos;
    while ((pos = buf.find('\n')) != std::string::npos) {
        std::string line = buf.substr(0, pos);
        buf.erase(0, pos + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data:", 0) == 0) {
            size_t k = 5;
            while (k < line.size() && line[k] == ' ') ++k;
            on_data(line.substr(k));
        }
    }
}
}   // namespace

Endpoint parse_base_url(const std::string& url) {
    std::string rest = url;
    if (rest.rfind("http://", 0) == 0)
        rest = rest.substr(7);
    else if (rest.find("://") != std::string::npos)
        throw Error("--base-url: only http:// is supported, got " + url);
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    if (rest.find('/') != std::string::npos)
        throw Error("--base-url: give scheme://host:port only (no path), got " + url);
    Endpoint ep;
    const size_t colon = rest.rfind(':');
    ep.host = colon == std::string::npos ? rest : rest.substr(0, colon);
    if (colon != std::string::npos) {
        try {
            ep.port = std::stoi(rest.substr(colon + 1));
        } catch (const std::exception&) {
            throw Error("--base-url: bad port in " + url);
        }
    }
    if (ep.host.empty() || ep.port <= 0 || ep.port > 65535) throw Error("--base-url: bad address " + url);
    return ep;
}

std::string get_text(const Endpoint& ep, const std::string& path) {
    httplib::Client cli(ep.host, ep.port);
    cli.set_read_timeout(60, 0);
    httplib::Headers h;
    if (!ep.api_key.empty()) h.emplace("Authorization", "Bearer " + ep.api_key);
    auto res = cli.Get(path.c_str(), h);
    if (!res) throw Error("GET " + path + ": " + httplib::to_string(res.error()));
    if (res->status != 200) throw Error("GET " + path + ": HTTP " + std::to_string(res->status) + " " + res->body);
    return res->body;
}

nlohmann::ordered_json get_json(const Endpoint& ep, const std::string& path) {
    const std::string body = get_text(ep, path);
    try {
        return nlohmann::ordered_json::parse(body);
    } catch (const std::exception& e) {
        throw Error("GET " + path + ": not JSON: " + e.what());
    }
}

RequestResult stream_request(const Endpoint& ep, const std::string& path, const nlohmann::ordered_json& body, bool chat,
                             const std::function<int64_t(const std::string&)>& count_tokens, std::string& text) {
    RequestResult r;
    httplib::Client cli(ep.host, ep.port);
    cli.set_read_timeout(time_t(ep.timeout_s), 0);
    cli.set_connection_timeout(30, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers.emplace("Content-Type", "application/json");
    if (!ep.api_key.empty()) req.headers.emplace("Authorization", "Bearer " + ep.api_key);
    req.body = body.dump();
    std::string buf, raw;
    double st = now_s(), last = 0;
    bool got_first = false, done = false, have_usage = false;
    const std::function<void(const std::string&)> on_event = [&](const std::string& data) {
        if (data == "[DONE]") {
            done = true;
            return;
        }
        nlohmann::ordered_json j;
        try {
            j = nlohmann::ordered_json::parse(data);
        } catch (const std::exception&) {
            r.error = "bad SSE data: " + data.substr(0, 200);
            return;
        }
        const auto ch = j.find("choices");
        if (ch != j.end() && ch->is_array() && !ch->empty()) {
            const double t = now_s();
            if (!got_first) {
                r.ttft = t - st;
                got_first = true;
            } else {
                r.itl.push_back(t - last);
            }
            last = t;
            append_choice_text((*ch)[0], chat, text);
        } else if (j.contains("usage") && j["usage"].is_object()) {
            r.output_tokens = j["usage"].value("completion_tokens", int64_t(0));
            r.prompt_tokens = j["usage"].value("prompt_tokens", int64_t(0));
            have_usage = true;
        } else if (j.contains("error")) {
            r.error = j["error"].dump();
        }
    };
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        buf.append(data, len);
        if (raw.size() < 4096) raw.append(data, std::min<size_t>(len, 4096));
        take_data_lines(buf, on_event);
        return true;
    };
    st = now_s();
    auto res = cli.send(req);
    if (!res) {
        r.error = "request failed: " + httplib::to_string(res.error());
        return r;
    }
    if (res->status != 200) {
        r.error = "HTTP " + std::to_string(res->status) + ": " + raw.substr(0, 500);
        return r;
    }
    if (!got_first) {
        if (r.error.empty()) r.error = "no token-bearing SSE message";
        return r;
    }
    r.latency = last - st;
    if (!have_usage) r.output_tokens = count_tokens ? count_tokens(text) : int64_t(r.itl.size() + 1);
    r.success = r.error.empty() && done;
    if (!done && r.error.empty()) r.error = "stream ended without [DONE]";
    return r;
}

}   // namespace kimi::bench

namespace kimi::bench {
std::pair<int, nlohmann::ordered_json> post_json(const Endpoint& ep, const std::string& path,
                                                 const nlohmann::ordered_json& body) {
    httplib::Client cli(ep.host, ep.port);
    cli.set_read_timeout(time_t(ep.timeout_s), 0);
    cli.set_connection_timeout(30, 0);
    httplib::Headers h;
    if (!ep.api_key.empty()) h.emplace("Authorization", "Bearer " + ep.api_key);
    auto res = cli.Post(path.c_str(), h, body.dump(), "application/json");
    if (!res) return {0, {{"error", httplib::to_string(res.error())}}};
    try {
        return {res->status, nlohmann::ordered_json::parse(res->body)};
    } catch (const std::exception&) {
        return {res->status, {{"error", res->body.substr(0, 500)}}};
    }
}
}   // namespace kimi::bench
