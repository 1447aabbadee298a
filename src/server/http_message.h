// HTTP/1.1 messages as the server reads and writes them (RFC 9112): a request parser fed
// bytes as they arrive, which frames by Content-Length or chunked transfer coding and
// leaves the bytes after one request in place (pipelining), and the response's head.
// Strict where framing is at stake (request smuggling): one Content-Length of digits only,
// never both Content-Length and Transfer-Encoding, only the `chunked` coding, bounded head
// and body. Every refusal carries the status to answer (400, 413, 431: a client's mistake is never a 5xx).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kimi::server {

struct HttpRequest {
    std::string method;   // as sent (methods are case-sensitive)
    std::string target;   // the request target as sent
    std::string path;     // percent-decoded, without the query
    std::string query;
    int minor_version = 1;                                      // HTTP/1.x
    std::vector<std::pair<std::string, std::string>> headers;   // names as sent, values trimmed
    std::string body;
    // Set by the listener while the request is handled: whether the client has closed its
    // connection (a long handler stops its work when it has). Null: unknown (never gone).
    std::function<bool()> client_gone;
    double arrived_s = 0.0;   // set by the listener: when it was read in full (steady clock, seconds)

    // Case-insensitive lookups; header() is "" when absent.
    bool has_header(std::string_view name) const;
    std::string header(std::string_view name) const;
    size_t header_count(std::string_view name) const;
    // Whether the connection stays open after this request (HTTP/1.1 unless "close";
    // HTTP/1.0 only with "keep-alive").
    bool keep_alive() const;
    bool expects_continue() const;   // "Expect: 100-continue" (HTTP/1.1)
};

struct HttpLimits {
    size_t max_head_bytes = 64 << 10;   // request line + headers
    size_t max_headers = 128;
    size_t max_body_bytes = 16 << 20;
};

// A refusal: the status to answer and why; the connection closes after it.
struct HttpParseError {
    int status = 400;
    std::string message;
};

class RequestParser {
public:
    explicit RequestParser(const HttpLimits& limits) : limits_(limits) {}

    enum class State { kNeedMore, kHeadDone, kComplete, kError };
    // Consumes what it can of `in` (erasing the consumed bytes) and says where the request
    // stands. kHeadDone is reported once, when the head is read and a body follows (time for
    // "100 Continue"); keep calling with more bytes. After kComplete, take() the request;
    // bytes after it stay in `in` for the next one.
    State feed(std::string& in);
    HttpRequest take();
    const HttpRequest& peek() const { return req_; }   // the head, once kHeadDone
    const HttpParseError& error() const { return error_; }
    bool started() const { return phase_ != Phase::kHead || seen_bytes_; }   // a request has begun arriving
    void reset();

private:
    enum class Phase { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone };
    State fail(int status, std::string message);
    bool parse_head(std::string_view head);
    State feed_body(std::string& in);

    HttpLimits limits_;
    Phase phase_ = Phase::kHead;
    HttpRequest req_;
    HttpParseError error_;
    size_t body_left_ = 0;   // Content-Length bytes, or the current chunk's, still to read
    size_t trailer_bytes_ = 0;
    bool seen_bytes_ = false, head_reported_ = false;
};

// "HTTP/1.1 200 OK\r\n" + headers + "\r\n" (the caller adds Content-Length or chunked framing).
std::string status_line(int status);
const char* reason_phrase(int status);

}   // namespace kimi::server
