// libFuzzer target: the server's HTTP/1.1 request parser (src/server/http_message.h) on the
// bytes a client may send. Byte 0 picks the limits (small ones reach the 413 and 431 paths,
// the defaults the rest) and byte 1 the size of the pieces the bytes arrive in; the rest is
// the stream of one connection (pipelined requests included).
// Checked beyond "no crash": the requests parsed and the refusal are the same whatever the
// split of the bytes (whole, byte by byte); a refusal carries a 4xx status and a message; a
// parsed request respects the limits (body size, header count).
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "server/http_message.h"

namespace {

using kimi::fuzz::Input;
using kimi::server::HttpLimits;
using kimi::server::HttpRequest;
using kimi::server::RequestParser;

struct Outcome {
    std::vector<HttpRequest> requests;
    int status = 0;   // of a refusal
};

Outcome parse(std::string_view bytes, size_t piece, const HttpLimits& limits) {
    Outcome out;
    RequestParser parser(limits);
    std::string in;
    size_t at = 0;
    for (int guard = 0; guard < 1 << 20; ++guard) {
        const RequestParser::State st = parser.feed(in);
        if (st == RequestParser::State::kComplete) {
            out.requests.push_back(parser.take());
            continue;
        }
        if (st == RequestParser::State::kError) {
            out.status = parser.error().status;
            fuzz_assert(out.status >= 400 && out.status < 500, std::to_string(out.status));
            fuzz_assert(!parser.error().message.empty());
            return out;
        }
        if (st == RequestParser::State::kHeadDone) continue;
        if (at >= bytes.size()) return out;
        const size_t n = std::min(piece, bytes.size() - at);
        in.append(bytes.substr(at, n));
        at += n;
    }
    kimi::fuzz::fail("the parser did not make progress");
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in(data, size);
    HttpLimits limits;
    if (in.byte() & 1) {
        limits.max_head_bytes = 256;
        limits.max_headers = 8;
        limits.max_body_bytes = 64;
    }
    const size_t piece = 1 + in.byte() % 64;
    const std::string_view bytes = in.rest();
    const Outcome whole = parse(bytes, bytes.size() + 1, limits);
    const Outcome split = parse(bytes, piece, limits);
    fuzz_assert(whole.status == split.status, std::to_string(whole.status) + " vs " + std::to_string(split.status));
    fuzz_assert(whole.requests.size() == split.requests.size());
    for (size_t i = 0; i < whole.requests.size(); ++i) {
        const HttpRequest& a = whole.requests[i];
        const HttpRequest& b = split.requests[i];
        fuzz_assert(a.method == b.method && a.target == b.target && a.path == b.path && a.body == b.body);
        fuzz_assert(a.headers == b.headers);
        fuzz_assert(a.body.size() <= limits.max_body_bytes);
        fuzz_assert(a.headers.size() <= limits.max_headers);
        fuzz_assert(a.path.find('\0') == std::string::npos);
    }
    return 0;
}
