// libFuzzer target: the Anthropic Messages and OpenAI Responses converters
// (src/server/anthropic_request.cpp, responses_request.cpp) and the chat path they feed — the
// body bytes through parse_body, the converter and parse_chat_request, exactly as
// http_server.cpp's /v1/messages, /v1/messages/count_tokens and /v1/responses call them, with
// the synthetic tokenizers and chat formats of fuzz_request.
// Input: byte 0 picks the route and the model, the rest is the HTTP body:
//   bits 0-1  0 /v1/messages (messages_to_chat(body, false)); 1 /v1/messages/count_tokens
//             (messages_to_chat(body, true), max_tokens 1, no context or token limit);
//             2 /v1/responses; 3 /v1/responses continuing a small fixed stored conversation
//             (previous_response_id's: text, an image when the model takes images, a tool call
//             and its result, a reply)
//   bit 2     Kimi-K3 (XTML format) or Kimi Linear tokenizer and format
//   bit 3     K3 with a vision tower: image parts are probed from their headers (a MediaLoader)
// A request is either refused with an ApiError (4xx) or becomes a job; anything else that
// escapes (kimi::Error, nlohmann or std exceptions) would be answered "500 internal error" by
// the server, so it is reported as a crash. An accepted job passes fuzz_request's checks; a
// Messages request's stop sequences are non-empty strings; a Responses request keeps the
// stored conversation in front of its own (the stored reply may take the input's first calls)
// and echoes an object, and its conversation with a reply stores (stored_conversation) as the
// server stores it after answering.
// KIMI_FUZZ_SAVE_500=DIR: as in fuzz_request (would-be 500s saved, the fuzzing goes on).
#include <limits>
#include <string>

#include "fuzz_server.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/media_loader.h"
#include "server/openai_request.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace {

using J = nlohmann::ordered_json;
using namespace kimi::server;
using kimi::fuzz::check_job;
using kimi::fuzz::Input;

// A 16×16 PNG, the image of the stored conversation.
constexpr const char* kPng =
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAABlklEQVR42hXRURVEIQhFUSMYgQhGMAIRiGCEE8EIRiACEYhABCLMG7/ZrMt1jMEc"
    "yGAN9kAHNjgDBnfwBj6IQQ5q0IMxJnMikzXZE53Y5EyY3Mmb+CQmOalJzw8IUxBhCVtQwYQjIFzhCS6EkEIJLR9YzIUs1mIvdGGLs2BxF2/hi1jk"
    "ohb9PrCZG9mszd7oxjZnw+Zu3sY3sclNbXp/QJmKKEvZiiqmHAXlKk9xJZRUSmn9gDENMZaxDTXMOAbGNZ7hRhhplNH2gcM8yGEd9kEPdjgHDvfw"
    "Dn6IQx7q0OcD/wK/Sr4jv9hfkG/1N/x/Fx44BCQU9Pc94zIvclmXfdGLXc79j9/Lu/glLnmpS98PPOZDHuuxH/qwx3n/5ffxHv6IRz7q0e8DznTE"
    "Wc521DHn+D/KdZ7jTjjplNP+gWAGEqxgBxpYcOIf/AYv8CCCDCro+EAyE0lWshNNLDn5P/MmL/Ekkkwq6fxAMQspVrELLaw49S/lFq/wIoosquj6"
    "QDMbaVazG22sOf2v8Dav8SaabKrp5geIAnAQC3NfwAAAAABJRU5ErkJggg==";

// previous_response_id's entry: a conversation as the server stores it (its image by SHA-256).
StoredResponse make_stored(bool image) {
    J messages = J::parse(R"([
        {"role": "user", "content": [{"type": "text", "text": "What is in this picture, and the weather?"}]},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "A gradient; it is sunny in Paris."}])");
    if (image) messages[0]["content"].push_back({{"type", "image_url"}, {"image_url", {{"url", kPng}}}});
    return stored_conversation(std::move(messages), J::object(), nullptr);
}

const StoredResponse& stored(bool image) {
    static const StoredResponse with = make_stored(true), without = make_stored(false);
    return image ? with : without;
}

const MediaLoader& media() {
    static const MediaLoader m(kimi::image::MediaConfig{}, MediaLimits{}, "");
    return m;
}

// An accepted Responses request, checked against what the server does with it next.
void check_responses(const ResponsesRequest& r, const J& previous, const StoredImages* known) {
    fuzz_assert(r.echo.is_object(), "the echo is not an object");
    fuzz_assert(r.conversation.is_array(), "the conversation is not an array");
    const size_t n = previous.is_array() ? previous.size() : 0;
    fuzz_assert(r.conversation.size() >= n, "the stored conversation lost messages");
    // (its last message, the stored reply, may take the calls and reasoning of the input's first items)
    for (size_t i = 0; i + 1 < n; ++i) fuzz_assert(r.conversation[i] == previous[i], "the stored conversation changed");
    J messages = r.conversation;
    messages.push_back({{"role", "assistant"}, {"content", "ok"}});
    const StoredResponse s = stored_conversation(std::move(messages), J::object(), known);
    fuzz_assert(s.body_bytes > 0, "a stored conversation of no bytes");
}

// One body through the handler's calls; an ApiError is the clean answer.
void handle(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.byte();
    const int route = mode & 3;
    const bool k3 = mode & 4, vision = k3 && (mode & 8);
    const std::string body(in.rest());
    const kimi::fuzz::Model& m = kimi::fuzz::model(k3);
    ParseContext pc{m.tok, "kimi-fuzz", 4096, m.vocab_size, m.format.get(), 64};
    if (vision) pc.media = &media();
    try {
        if (route == 0 || route == 1) {
            const bool count_only = route == 1;
            const MessagesRequest mr = messages_to_chat(parse_body(body), count_only);
            for (const std::string& s : mr.stop_sequences) fuzz_assert(!s.empty(), "an empty stop sequence");
            J chat = mr.chat;
            if (count_only) {   // the route counts the prompt alone
                chat["max_tokens"] = 1;
                pc.max_model_len = std::numeric_limits<int32_t>::max();
                pc.max_request_tokens = std::numeric_limits<int64_t>::max();
            }
            check_job(parse_chat_request(chat, pc), pc);
            return;
        }
        const J b = parse_body(body);
        static const J no_previous = nullptr;
        const bool continued = route == 3;
        (void)previous_response_id(b);   // read first by the handler (the store is not fuzzed)
        const J& previous = continued ? *stored(vision).messages : no_previous;
        const StoredImages* known = continued ? stored(vision).images.get() : nullptr;
        const ResponsesRequest rr = responses_to_chat(b, previous);
        pc.stored_images = known;
        check_job(parse_chat_request(rr.chat, pc), pc);
        check_responses(rr, previous, known);
    } catch (const ApiError& e) {
        kimi::fuzz::check_refusal(e);
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    return kimi::fuzz::run_one(handle, data, size);
}
