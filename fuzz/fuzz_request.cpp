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
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <string>

#include "fuzz_util.h"
#include "grammar/matcher.h"
#include "runtime/structured_output.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace {

using J = nlohmann::ordered_json;
using namespace kimi::server;
using kimi::fuzz::Input;

struct Model {
    const kimi::tok::Tokenizer* tok;
    std::unique_ptr<kimi::chat::ChatFormat> format;
    int32_t vocab_size;   // the model's: n_base + kModelVocabExtra, as make-model writes it
};

const Model& model(bool k3) {
    static const Model kl{&kimi::fuzz::kimi_linear_tokenizer(),
                          kimi::chat::chat_format_for(kimi::fuzz::kimi_linear_tokenizer()),
                          kimi::fuzz::kimi_linear_tokenizer().n_base() + kimi::tok::kModelVocabExtra};
    static const Model k{&kimi::fuzz::k3_tokenizer(), kimi::chat::chat_format_for(kimi::fuzz::k3_tokenizer()),
                         kimi::fuzz::k3_tokenizer().n_base() + kimi::tok::kModelVocabExtra};
    return k3 ? k : kl;
}

// KIMI_FUZZ_SAVE_500: keeps the input of each new 500 message.
void save_500(const std::string& what, const uint8_t* data, size_t size) {
    static const char* dir = std::getenv("KIMI_FUZZ_SAVE_500");
    static std::set<std::string> seen;
    if (seen.insert(what).second) {
        const std::string path = std::string(dir) + "/500-" + std::to_string(seen.size());
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
        std::ofstream(path + ".txt") << what << "\n";
    }
}

bool in_range(int32_t id, int32_t vocab) { return id >= 0 && id < vocab; }

void check_job(const GenerationJob& job, const ParseContext& pc) {
    fuzz_assert(!job.prompts.empty(), "a job without prompts");
    fuzz_assert(int64_t(job.prompts.size()) * job.n <= pc.max_sequences, "more sequences than allowed");
    const kimi::SamplingParams& p = job.params;
    fuzz_assert(p.max_tokens >= 1, "max_tokens < 1: " + std::to_string(p.max_tokens));
    for (const PromptInput& pr : job.prompts) {
        fuzz_assert(!pr.ids.empty(), "an empty prompt");
        // note: the tokenizer's ids (n_base + 258) pass the model's vocabulary (n_base + 256): a
        // completion prompt spelling <|reserved_token_N|> for the last two is refused by
        // Engine::submit (400), so the parser is held to the tokenizer's range only.
        for (int32_t id : pr.ids)
            fuzz_assert(in_range(id, pc.tok->n_vocab()), "prompt id " + std::to_string(id) + " outside the vocabulary");
        fuzz_assert(int64_t(pr.ids.size()) + p.max_tokens <= int64_t(pc.max_model_len),
                    "prompt + max_tokens past the context");
    }
    int64_t total = 0;
    for (const PromptInput& pr : job.prompts) total += (int64_t(pr.ids.size()) + p.max_tokens) * job.n;
    fuzz_assert(total <= pc.max_request_tokens, "more tokens than max_request_tokens");
    for (int32_t id : p.stop_token_ids) fuzz_assert(in_range(id, pc.vocab_size), "stop token id out of range");
    for (const auto& [id, bias] : p.logit_bias) {
        fuzz_assert(in_range(id, pc.vocab_size), "logit_bias id out of range");
        fuzz_assert(std::isfinite(bias) && std::fabs(bias) <= 100.0f, "logit_bias value out of range");
    }
    fuzz_assert(p.temperature >= 0.0f && p.temperature <= 2.0f, "temperature");
    fuzz_assert(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p");
    fuzz_assert(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p");
    fuzz_assert(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty), "repetition_penalty");
    fuzz_assert(p.logprobs >= -1 && p.logprobs <= 20, "logprobs");
    fuzz_assert(job.n >= 1 && job.n <= 128, "n");
    if (p.structured) {
        p.structured->grammar().validate();
        kimi::grammar::Matcher m(p.structured->grammar());
        fuzz_assert(!m.dead(), "a structured-output grammar that cannot start");
    }
}

// One body through the handler's calls; an ApiError is the clean answer.
void handle(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.byte();
    const bool chat = mode & 1, k3 = mode & 2, tokenize = mode & 4;
    const std::string body(in.rest());
    const Model& m = model(k3);
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
        kimi::fuzz::note_refusal(e.what());
        fuzz_assert(e.status >= 400 && e.status < 500,
                    "an ApiError that is not a 4xx: " + std::to_string(e.status) + " " + e.what());
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool keep_going = std::getenv("KIMI_FUZZ_SAVE_500") != nullptr;
    if (!keep_going) {   // anything else escaping is a crash, with the stack where it was thrown
        handle(data, size);
        return 0;
    }
    try {
        handle(data, size);
    } catch (const std::exception& e) {   // the server's exception handler would answer 500
        save_500(e.what(), data, size);
    }
    return 0;
}
