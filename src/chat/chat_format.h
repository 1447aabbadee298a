// ChatFormat: one model family's conversation format — how a chat request becomes a prompt
// (text + token ids, markers as their special ids) and how the model's generated text is
// parsed back into an OpenAI assistant message (reasoning, content, tool calls), streamed.
// The format is picked once per tokenizer (chat_format_for): Kimi-K3's XTML when the
// tokenizer has K3's markers, the Kimi Linear <|im_…|> format otherwise.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace kimi::chat {

// An image part as the K3 prompt shows it (docs/chat.md#k3-images): its size as sent (before
// any resize) and its number of <|media_pad|> tokens.
struct ImagePrompt {
    int32_t width = 0, height = 0;
    int64_t n_tokens = 0;
};
// The K3 image prompt as text (<|media_begin|>image WxH<|media_content|> + N × <|media_pad|> +
// <|media_end|>): what an image part renders as, for raw prompts (`generate --image`).
std::string image_prompt_text(const ImagePrompt& img);
// The placeholder a raw prompt marks an image's place with (and a render without images shows).
inline constexpr const char* kImagePlaceholder = "<|kimi_image_placeholder|>";

// Called for each image part in prompt order (part: the content part; where: its JSON path,
// e.g. "messages[0].content[1]"). Throws kimi::Error to refuse the image.
using ImageResolver = std::function<ImagePrompt(const nlohmann::ordered_json& part, const std::string& where)>;

// Everything a render reads, as an OpenAI /v1/chat/completions body carries it.
struct ChatRequest {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools;             // array, or null
    nlohmann::ordered_json tool_choice;       // "auto" | "none" | "required" | object, or null
    nlohmann::ordered_json response_format;   // object, or null
    bool add_generation_prompt = false;
    bool thinking = true;                                 // K3: the think channel
    std::optional<std::string> thinking_effort = "max";   // K3: low | high | max (nullopt: no effort message)
    // Request mode (the server, `chat-template --request`): tool-call `arguments` strings that
    // parse to a JSON object are rendered from the parsed object, as vLLM does before templating.
    bool parse_string_arguments = false;
    // false (server): text in messages that spells a special token stays text.
    bool allow_special_in_content = false;
    // K3: each image part renders as <|media_begin|>image {W}x{H}<|media_content|> + N ×
    // <|media_pad|> + <|media_end|>; without a resolver, as the <|kimi_image_placeholder|> text.
    ImageResolver images;
};

// A request body's chat fields → ChatRequest (messages, tools, tool_choice, response_format,
// chat_template_kwargs {thinking, thinking_effort}, reasoning_effort, add_generation_prompt
// (default true)); request mode on. Throws kimi::Error naming the field.
ChatRequest chat_request_from_body(const nlohmann::ordered_json& body);

struct ToolCallOut {
    std::string id, name, arguments;   // arguments: JSON text
};

// The parsed assistant message (what a non-streamed response returns).
struct AssistantMessage {
    std::optional<std::string> content, reasoning_content;
    std::vector<ToolCallOut> tool_calls;
};

// One streamed piece: exactly one of the three kinds.
struct Delta {
    enum Kind : uint8_t { kReasoning, kContent, kToolCall } kind = kContent;
    std::string text;          // reasoning / content text
    int32_t tool_index = -1;   // kToolCall: the call's index, id/name/arguments complete
    ToolCallOut call;
};

// Incremental parser of the generated text (special tokens written as their text). A piece
// is emitted only when it is certain: never a partial tag, never a tag in the text.
class OutputParser {
public:
    virtual ~OutputParser() = default;
    virtual void push(std::string_view text, std::vector<Delta>& out) = 0;
    virtual void finish(std::vector<Delta>& out) = 0;   // end of generation: flush what is held
    virtual const AssistantMessage& message() const = 0;
};

class ChatFormat {
public:
    virtual ~ChatFormat() = default;
    virtual const char* name() const = 0;   // "kimi-linear" | "kimi-k3"
    virtual bool reasons() const = 0;       // replies have a reasoning channel (K3's think)
    virtual tok::ChatPrompt render(const ChatRequest& r) const = 0;
    // thinking: the generation prompt opened the think channel (K3).
    virtual std::unique_ptr<OutputParser> new_parser(bool thinking) const = 0;
};

std::unique_ptr<ChatFormat> chat_format_for(const tok::Tokenizer& t);

}   // namespace kimi::chat
