// The HTTP/1.1 request parser (src/server/http_message.h): framing by Content-Length and by
// chunked coding, pipelined requests left in place, the same request whatever the split of the
// bytes, and each refusal with its status — the strictness that keeps request smuggling out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "server/http_message.h"

namespace kimi::server {
namespace {

struct Parsed {
    std::vector<HttpRequest> requests;
    int error = 0;   // status of a refusal, 0 if none
    std::string message;
    bool head_done = false;   // kHeadDone was reported
};

// Feeds `bytes` in pieces of at most `piece` bytes; collects every complete request.
Parsed parse(const std::string& bytes, size_t piece = std::string::npos, HttpLimits limits = {}) {
    Parsed p;
    RequestParser parser(limits);
    std::string in;
    size_t at = 0;
    for (;;) {
        const RequestParser::State st = parser.feed(in);
        if (st == RequestParser::State::kComplete) {
            p.requests.push_back(parser.take());
            continue;
        }
        if (st == RequestParser::State::kError) {
            p.error = parser.error().status;
            p.message = parser.error().message;
            return p;
        }
        if (st == RequestParser::State::kHeadDone) {
            p.head_done = true;
            continue;
        }
        if (at >= bytes.size()) return p;
        const size_t n = std::min(piece, bytes.size() - at);
        in.append(bytes, at, n);
        at += n;
    }
}

TEST(HttpParser, GetAndPipelinedRequests) {
    const std::string two =
        "GET /health HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/completions?x=1 HTTP/1.1\r\n"
        "Content-Length: 5\r\ncontent-type: application/json\r\n\r\nhello";
    for (size_t piece : {size_t(1), size_t(3), size_t(17), std::string::npos}) {
        const Parsed p = parse(two, piece);
        ASSERT_EQ(p.error, 0) << p.message;
        ASSERT_EQ(p.requests.size(), 2u) << "piece " << piece;
        EXPECT_EQ(p.requests[0].method, "GET");
        EXPECT_EQ(p.requests[0].path, "/health");
        EXPECT_TRUE(p.requests[0].body.empty());
        EXPECT_EQ(p.requests[1].method, "POST");
        EXPECT_EQ(p.requests[1].path, "/v1/completions");
        EXPECT_EQ(p.requests[1].query, "x=1");
        EXPECT_EQ(p.requests[1].header("Content-Type"), "application/json");   // names case-insensitive
        EXPECT_EQ(p.requests[1].body, "hello");
    }
}

TEST(HttpParser, ChunkedBodiesWithExtensionsAndTrailers) {
    const std::string req =
        "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: 1\r\n\r\n"
        "GET /next HTTP/1.1\r\n\r\n";
    for (size_t piece : {size_t(1), size_t(2), size_t(7), std::string::npos}) {
        const Parsed p = parse(req, piece);
        ASSERT_EQ(p.error, 0) << p.message;
        ASSERT_EQ(p.requests.size(), 2u);
        EXPECT_EQ(p.requests[0].body, "hello world");
        EXPECT_EQ(p.requests[1].path, "/next");
        EXPECT_TRUE(p.head_done);
    }
}

TEST(HttpParser, FramingIsStrict) {
    const struct {
        const char* bytes;
        int status;
    } cases[] = {
        {"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\nhello", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", 400},
        {"GET / HTTP/2.0\r\n\r\n", 400},
        {"GET /%zz HTTP/1.1\r\n\r\n", 400},
        {"GET /a%00 HTTP/1.1\r\n\r\n", 400},
        {"GET relative HTTP/1.1\r\n\r\n", 400},
        {"GET  / HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n", 400},
        {"G(T / HTTP/1.1\r\n\r\n", 400},
    };
    for (const auto& c : cases) {
        const Parsed p = parse(c.bytes);
        EXPECT_EQ(p.error, c.status) << c.bytes;
        EXPECT_FALSE(p.message.empty());
    }
}

TEST(HttpParser, LimitsOnHeadAndBody) {
    HttpLimits small;
    small.max_head_bytes = 256;
    small.max_headers = 4;
    small.max_body_bytes = 10;
    EXPECT_EQ(parse("GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n", 1, small).error, 431);
    EXPECT_EQ(parse("GET / HTTP/1.1\r\nX: " + std::string(300, 'a'), 1, small).error, 431);   // before its end arrives
    EXPECT_EQ(parse("GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n", std::string::npos, small).error,
              431);
    EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", std::string::npos, small).error, 413);
    EXPECT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n",
                    std::string::npos, small)
                  .error,
              413);
    const Parsed ok = parse("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", 1, small);
    ASSERT_EQ(ok.requests.size(), 1u);
    EXPECT_EQ(ok.requests[0].body, "0123456789");
}

TEST(HttpParser, TargetsVersionsAndConnectionOptions) {
    const Parsed p = parse(
        "GET http://host:80/v1/models?a HTTP/1.1\r\n\r\nGET /%76%31/models HTTP/1.0\r\n\r\n"
        "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET / HTTP/1.1\r\nConnection: x, close\r\n\r\n"
        "\r\n\r\nGET / HTTP/1.1\nHost: lf-only\n\n");
    ASSERT_EQ(p.error, 0) << p.message;
    ASSERT_EQ(p.requests.size(), 5u);
    EXPECT_EQ(p.requests[0].path, "/v1/models");
    EXPECT_EQ(p.requests[0].query, "a");
    EXPECT_TRUE(p.requests[0].keep_alive());
    EXPECT_EQ(p.requests[1].path, "/v1/models");   // percent-decoded: routes and the API key see one path
    EXPECT_FALSE(p.requests[1].keep_alive());      // HTTP/1.0 closes unless told
    EXPECT_TRUE(p.requests[2].keep_alive());
    EXPECT_FALSE(p.requests[3].keep_alive());
    EXPECT_EQ(p.requests[4].header("host"), "lf-only");
    const Parsed e = parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
    ASSERT_EQ(e.requests.size(), 1u);
    EXPECT_TRUE(e.head_done);
    EXPECT_TRUE(e.requests[0].expects_continue());
}

// Random bytes and random mutations of valid requests: never a crash, and whenever a request
// parses, feeding it one byte at a time parses it the same.
TEST(HttpParser, RandomInputsNeverCrashAndSplitsAgree) {
    Rng rng(11);
    const std::string base =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        "4\r\nabcd\r\n0\r\n\r\nGET /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz";
    for (int trial = 0; trial < 3000; ++trial) {
        std::string s = base;
        const int edits = 1 + int(rng.below(4));
        for (int k = 0; k < edits; ++k) {
            const size_t at = rng.below(s.size());
            switch (rng.below(3)) {
                case 0: s[at] = char(rng.below(256)); break;
                case 1: s.erase(at, 1 + rng.below(3)); break;
                default: s.insert(at, 1, "\r\n:; 0a"[rng.below(7)]); break;
            }
        }
        if (trial % 3 == 0) {
            s.resize(64);
            for (auto& c : s) c = char(rng.below(256));
        }
        const Parsed whole = parse(s), bytes = parse(s, 1);
        EXPECT_EQ(whole.error, bytes.error) << s;
        ASSERT_EQ(whole.requests.size(), bytes.requests.size()) << s;
        for (size_t i = 0; i < whole.requests.size(); ++i) {
            EXPECT_EQ(whole.requests[i].target, bytes.requests[i].target);
            EXPECT_EQ(whole.requests[i].body, bytes.requests[i].body);
        }
    }
}

}   // namespace
}   // namespace kimi::server
