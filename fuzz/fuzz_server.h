// What the request-parsing targets (fuzz_request, fuzz_api_routes) share: the two synthetic
// models (tokenizer, chat format, vocabulary), the checks an accepted job must pass (the engine
// relies on them), and KIMI_FUZZ_SAVE_500 (keeping the inputs of would-be 500s and going on).
#pragma once
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "chat/chat_format.h"
#include "fuzz_util.h"
#include "grammar/matcher.h"
#include "runtime/structured_output.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace kimi::fuzz {

struct Model {
    const tok::Tokenizer* tok;
    std::unique_ptr<chat::ChatFormat> format;
    int32_t vocab_size;   // the model's: n_base + kModelVocabExtra, as make-model writes it
};

inline const Model& model(bool k3) {
    static const Model kl{&kimi_linear_tokenizer(), chat::chat_format_for(kimi_linear_tokenizer()),
                          kimi_linear_tokenizer().n_base() + tok::kModelVocabExtra};
    static const Model k{&k3_tokenizer(), chat::chat_format_for(k3_tokenizer()),
                         k3_tokenizer().n_base() + tok::kModelVocabExtra};
    return k3 ? k : kl;
}

// KIMI_FUZZ_SAVE_500=DIR: keeps the input of each new would-be-500 message (500-N, the message
// in 500-N.txt).
inline void save_500(const std::string& what, const uint8_t* data, size_t size) {
    static const char* dir = std::getenv("KIMI_FUZZ_SAVE_500");
    static std::set<std::string> seen;
    if (seen.insert(what).second) {
        const std::string path = std::string(dir) + "/500-" + std::to_string(seen.size());
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
        std::ofstream(path + ".txt") << what << "\n";
    }
}

// Runs one input: with KIMI_FUZZ_SAVE_500 set, an exception escaping `handle` is saved and the
// fuzzing goes on; otherwise it is a crash, with the stack where it was thrown.
template <class F>
int run_one(F&& handle, const uint8_t* data, size_t size) {
    static const bool keep_going = std::getenv("KIMI_FUZZ_SAVE_500") != nullptr;
    if (!keep_going) {
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

inline bool in_range(int32_t id, int32_t vocab) { return id >= 0 && id < vocab; }

// An accepted job, checked the way the engine relies on it.
inline void check_job(const server::GenerationJob& job, const server::ParseContext& pc) {
    fuzz_assert(!job.prompts.empty(), "a job without prompts");
    fuzz_assert(int64_t(job.prompts.size()) * job.n <= pc.max_sequences, "more sequences than allowed");
    const SamplingParams& p = job.params;
    fuzz_assert(p.max_tokens >= 1, "max_tokens < 1: " + std::to_string(p.max_tokens));
    for (const server::PromptInput& pr : job.prompts) {
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
    for (const server::PromptInput& pr : job.prompts) total += (int64_t(pr.ids.size()) + p.max_tokens) * job.n;
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
        grammar::Matcher m(p.structured->grammar());
        fuzz_assert(!m.dead(), "a structured-output grammar that cannot start");
    }
}

// A refusal: the ApiError must be a 4xx.
inline void check_refusal(const server::ApiError& e) {
    note_refusal(e.what());
    fuzz_assert(e.status >= 400 && e.status < 500,
                "an ApiError that is not a 4xx: " + std::to_string(e.status) + " " + e.what());
}

}   // namespace kimi::fuzz
