// libFuzzer target: the server's request parsing (src/server/openai_request.cpp,
// structured_request.cpp) — the body bytes through parse_body and parse_chat_request /
// parse_completion_request, exactly as the /v1/* handlers call them, with a synthetic
// tokenizer (1024 ranks) and its chat format.
// Input: byte 0 picks the endpoint and the model, the rest is the HTTP body:
//   bit 0  chat (/v1/chat/completions) or completion (/v1/completions)
//   bit 1  Kimi-K3 (XTML format) or Kimi Linear tokenizer and format
//   bit 2  as /tokenize calls it (chat: max_tokens 1, no stream, no context or token limit)
// A request is either refused with an ApiError (4xx) or becomes a job; anything else that
// escapes (kimi::Error, nlohmann or std exceptions) would be answered "500 internal error" by
// the server, so it is reported as a crash. An accepted job is checked the way the engine
// relies on it: prompt ids inside the vocabulary, max_tokens ≥ 1 and within the context,
// n × prompts and their tokens within the limits, stop ids / logit_bias ids in range,
// sampling values in range, and a structured-output grammar that validates and starts a
// matcher.
// KIMI_FUZZ_SAVE_500=DIR: an exception that would be a 500 is not fatal; the first input for
// each distinct message is saved to DIR (500-N, message in 500-N.txt), to fuzz on past a
// known server bug.
#include <limits>
#include <string>

#include "fuzz_server.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace {

using J = nlohmann::ordered_json;
using namespace kimi::server;
using kimi::fuzz::check_job;
using kimi::fuzz::Input;

// One body through the handler's calls; an ApiError is the clean answer.
void handle(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.byte();
    const bool chat = mode & 1, k3 = mode & 2, tokenize = mode & 4;
    const std::string body(in.rest());
    const kimi::fuzz::Model& m = kimi::fuzz::model(k3);
    ParseContext pc{m.tok, "kimi-fuzz", 4096, m.vocab_size, m.format.get(), 64};
    try {
        J b = parse_body(body);
        if (tokenize) {   // http_server.cpp's /tokenize: chat when the body has messages
            if (!b.contains("messages")) return;
            b["max_tokens"] = 1;
            b.erase("stream");
            pc.max_model_len = std::numeric_limits<int32_t>::max();
            pc.max_request_tokens = std::numeric_limits<int64_t>::max();
            check_job(parse_chat_request(b, pc), pc);
            return;
        }
        check_job(chat ? parse_chat_request(b, pc) : parse_completion_request(b, pc), pc);
    } catch (const ApiError& e) {
        kimi::fuzz::check_refusal(e);
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    return kimi::fuzz::run_one(handle, data, size);
}
