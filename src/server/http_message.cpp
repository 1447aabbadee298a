// HTTP/1.1 request parsing (see http_message.h). ref: RFC 9112 §2–§7 (message format,
// request line, field syntax, message body length, chunked transfer coding).
#include "server/http_message.h"

#include <algorithm>
#include <cctype>

namespace kimi::server {
namespace {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

// RFC 9110 token characters (method and field names).
bool is_tchar(char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The path percent-decoded; nullopt for a malformed escape or a decoded NUL.
std::optional<std::string> decode_path(std::string_view p) {
    std::string out;
    out.reserve(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
        if (p[i] != '%') {
            out += p[i];
            continue;
        }
        if (i + 2 >= p.size()) return std::nullopt;
        const int hi = hex_value(p[i + 1]), lo = hex_value(p[i + 2]);
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return std::nullopt;
        out += char(hi * 16 + lo);
        i += 2;
    }
    return out;
}

// A chunk-size line (its '\n' excluded) → the size; false when malformed.
bool parse_chunk_size(std::string_view line, size_t& size) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line = line.substr(0, line.find(';'));   // chunk extensions are ignored
    line = trim(line);
    if (line.empty() || line.size() > 15) return false;
    size = 0;
    for (char c : line) {
        const int h = hex_value(c);
        if (h < 0) return false;
        size = size * 16 + size_t(h);
    }
    return true;
}

// The end of the line starting at `from` (the index of its '\n'), or npos.
size_t line_end(std::string_view s, size_t from) { return s.find('\n', from); }

}   // namespace

bool HttpRequest::has_header(std::string_view name) const { return header_count(name) > 0; }

std::string HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return v;
    return "";
}

size_t HttpRequest::header_count(std::string_view name) const {
    size_t n = 0;
    for (const auto& [k, v] : headers) n += iequals(k, name);
    return n;
}

bool HttpRequest::keep_alive() const {
    const std::string c = header("Connection");
    bool close = false, keep = false;
    size_t i = 0;
    while (i <= c.size()) {   // a comma-separated list of options
        const size_t j = std::min(c.find(',', i), c.size());
        const std::string_view opt = trim(std::string_view(c).substr(i, j - i));
        close |= iequals(opt, "close");
        keep |= iequals(opt, "keep-alive");
        i = j + 1;
    }
    if (close) return false;
    return minor_version >= 1 || keep;
}

bool HttpRequest::expects_continue() const {
    return minor_version >= 1 && iequals(trim(header("Expect")), "100-continue");
}

void RequestParser::reset() {
    phase_ = Phase::kHead;
    req_ = HttpRequest{};
    error_ = {};
    body_left_ = trailer_bytes_ = 0;
    seen_bytes_ = head_reported_ = false;
}

HttpRequest RequestParser::take() {
    HttpRequest r = std::move(req_);
    reset();
    return r;
}

RequestParser::State RequestParser::fail(int status, std::string message) {
    error_ = {status, std::move(message)};
    return State::kError;
}

bool RequestParser::parse_head(std::string_view head) {
    // Request line: METHOD SP request-target SP HTTP/1.x
    size_t eol = line_end(head, 0);
    std::string_view line = head.substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == 0 || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        fail(400, "malformed request line");
        return false;
    }
    const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                           version = line.substr(sp2 + 1);
    if (!std::all_of(method.begin(), method.end(), is_tchar)) return fail(400, "malformed request method"), false;
    if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || (version[7] != '0' && version[7] != '1')) {
        if (version.substr(0, 5) == "HTTP/") return fail(400, "only HTTP/1.0 and HTTP/1.1 are served"), false;
        return fail(400, "malformed request line"), false;
    }
    if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) { return c <= ' ' || c == 0x7f; }))
        return fail(400, "malformed request target"), false;
    req_.method = std::string(method);
    req_.target = std::string(target);
    req_.minor_version = version[7] - '0';
    std::string_view origin = target;
    if (origin.substr(0, 7) == "http://" ||
        origin.substr(0, 8) == "https://") {   // absolute form: drop scheme and authority
        const size_t slash = origin.find('/', origin.find("//") + 2);
        origin = slash == std::string_view::npos ? std::string_view("/") : origin.substr(slash);
    }
    if (origin != "*" && origin.front() != '/') return fail(400, "malformed request target"), false;
    const size_t q = origin.find('?');
    const auto path = decode_path(origin.substr(0, q));
    if (!path) return fail(400, "malformed percent-encoding in the request path"), false;
    req_.path = *path;
    if (q != std::string_view::npos) req_.query = std::string(origin.substr(q + 1));

    // Header fields: name ":" OWS value OWS; no obsolete line folding.
    size_t at = eol + 1;
    while (at < head.size()) {
        eol = line_end(head, at);
        std::string_view f = head.substr(at, eol - at);
        at = eol + 1;
        if (!f.empty() && f.back() == '\r') f.remove_suffix(1);
        if (f.empty()) break;   // the blank line ending the head
        if (f.front() == ' ' || f.front() == '\t')
            return fail(400, "obsolete header line folding is not accepted"), false;
        const size_t colon = f.find(':');
        if (colon == 0 || colon == std::string_view::npos) return fail(400, "malformed header line"), false;
        const std::string_view name = f.substr(0, colon);
        if (!std::all_of(name.begin(), name.end(), is_tchar)) return fail(400, "malformed header name"), false;
        const std::string_view value = trim(f.substr(colon + 1));
        if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; })) {
            if (iequals(name, "Content-Length"))
                return fail(400, "invalid Content-Length header (one decimal number expected)"), false;
            return fail(400, "invalid character in header '" + std::string(name) + "'"), false;
        }
        if (req_.headers.size() >= limits_.max_headers)
            return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields"), false;
        req_.headers.emplace_back(std::string(name), std::string(value));
    }
    return true;
}

RequestParser::State RequestParser::feed(std::string& in) {
    if (!in.empty()) seen_bytes_ = true;
    if (phase_ == Phase::kHead) {
        // Empty lines before a request are ignored (RFC 9112 §2.2).
        size_t lead = 0;
        while (lead < in.size() && (in[lead] == '\r' || in[lead] == '\n')) ++lead;
        if (lead > 0) in.erase(0, lead);
        size_t end = in.find("\r\n\r\n");
        size_t skip = 4;
        const size_t lf = in.find("\n\n");
        if (lf != std::string::npos && (end == std::string::npos || lf < end)) {
            end = lf;
            skip = 2;
        }
        if (end == std::string::npos) {
            if (in.size() > limits_.max_head_bytes)
                return fail(431,
                            "the request head is larger than " + std::to_string(limits_.max_head_bytes >> 10) + " KiB");
            return State::kNeedMore;
        }
        if (end + skip > limits_.max_head_bytes)
            return fail(431,
                        "the request head is larger than " + std::to_string(limits_.max_head_bytes >> 10) + " KiB");
        if (!parse_head(std::string_view(in).substr(0, end + skip))) return State::kError;
        in.erase(0, end + skip);

        // Body length (RFC 9112 §6.3).
        const size_t n_te = req_.header_count("Transfer-Encoding"), n_cl = req_.header_count("Content-Length");
        if (n_te > 0 && n_cl > 0) return fail(400, "both Transfer-Encoding and Content-Length were sent");
        if (n_te > 0) {
            if (n_te > 1 || !iequals(trim(req_.header("Transfer-Encoding")), "chunked"))
                return fail(400, "only the chunked transfer coding is supported");
            phase_ = Phase::kChunkSize;
        } else if (n_cl > 0) {
            const std::string v = req_.header("Content-Length");
            if (n_cl > 1 || v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
                return fail(400, "invalid Content-Length header (one decimal number expected)");
            const uint64_t n = std::stoull(v);
            if (n > limits_.max_body_bytes)
                return fail(413,
                            "the request body is larger than " + std::to_string(limits_.max_body_bytes >> 20) + " MiB");
            body_left_ = size_t(n);
            phase_ = body_left_ > 0 ? Phase::kBody : Phase::kDone;
            if (body_left_ > 0) req_.body.reserve(body_left_);
        } else {
            phase_ = Phase::kDone;
        }
        if (phase_ != Phase::kDone && !head_reported_) {
            head_reported_ = true;
            return State::kHeadDone;
        }
    }
    return feed_body(in);
}

RequestParser::State RequestParser::feed_body(std::string& in) {
    size_t at = 0;
    auto consume = [&] { in.erase(0, at); };
    // Body bytes of a Content-Length body or of a chunk: false while more are to come.
    auto take_body = [&](Phase then) {
        const size_t n = std::min(body_left_, in.size() - at);
        req_.body.append(in, at, n);
        at += n;
        body_left_ -= n;
        if (body_left_ > 0) return false;
        phase_ = then;
        return true;
    };
    for (;;) {
        switch (phase_) {
            case Phase::kHead: consume(); return State::kNeedMore;   // not reached: the head is parsed first
            case Phase::kDone: consume(); return State::kComplete;
            case Phase::kBody:
                if (!take_body(Phase::kDone)) return consume(), State::kNeedMore;
                break;
            case Phase::kChunkSize: {
                const size_t eol = in.find('\n', at);
                if (eol == std::string::npos) {
                    if (in.size() - at > 1024) return fail(400, "malformed chunk size line");
                    return consume(), State::kNeedMore;
                }
                size_t size = 0;
                if (!parse_chunk_size(std::string_view(in.data() + at, eol - at), size))
                    return fail(400, "malformed chunk size");
                at = eol + 1;
                if (size > limits_.max_body_bytes - std::min(limits_.max_body_bytes, req_.body.size()))
                    return fail(
                        413,
                        "the request body is larger than " + std::to_string(limits_.max_body_bytes >> 20) + " MiB");
                body_left_ = size;
                phase_ = size == 0 ? Phase::kTrailers : Phase::kChunkData;
                break;
            }
            case Phase::kChunkData:
                if (!take_body(Phase::kChunkDataEnd)) return consume(), State::kNeedMore;
                break;
            case Phase::kChunkDataEnd: {   // the CRLF after a chunk's data
                if (in.size() - at < 2) {
                    if (in.size() - at == 1 && in[at] == '\n') {
                        ++at;
                        phase_ = Phase::kChunkSize;
                        break;
                    }
                    if (in.size() - at == 1 && in[at] != '\r')
                        return fail(400, "malformed chunk (no CRLF after its data)");
                    return consume(), State::kNeedMore;
                }
                if (in.compare(at, 2, "\r\n") == 0)
                    at += 2;
                else if (in[at] == '\n')
                    at += 1;
                else
                    return fail(400, "malformed chunk (no CRLF after its data)");
                phase_ = Phase::kChunkSize;
                break;
            }
            case Phase::kTrailers: {   // trailer fields up to a blank line; ignored
                const size_t eol = in.find('\n', at);
                if (eol == std::string::npos) {
                    if (trailer_bytes_ + (in.size() - at) > limits_.max_head_bytes)
                        return fail(431, "the trailer section is too large");
                    return consume(), State::kNeedMore;
                }
                const size_t len = eol - at;
                trailer_bytes_ += len + 1;
                if (trailer_bytes_ > limits_.max_head_bytes) return fail(431, "the trailer section is too large");
                const bool blank = len == 0 || (len == 1 && in[at] == '\r');
                at = eol + 1;
                if (blank) phase_ = Phase::kDone;
                break;
            }
        }
    }
}

const char* reason_phrase(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 413: return "Content Too Large";
        case 422: return "Unprocessable Content";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        case 505: return "HTTP Version Not Supported";
        default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
    }
}

std::string status_line(int status) {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
}

}   // namespace kimi::server
