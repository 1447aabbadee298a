// The Kimi Linear (K2 family) conversation format: OpenAI messages → its <|im_…|> prompt
// (kimi_linear_render.cpp), and its native tool-call markers parsed back into calls
// (kimi_linear_tool_calls.cpp). Behind ChatFormat as "kimi-linear" (kimi_linear_format.cpp).
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace kimi::chat {

struct ContentPart {
    bool is_image = false;   // rendered as the media placeholder
    std::string text;
};

struct ChatMessage {
    std::string role;                                // system | user | assistant | tool | ...
    std::optional<std::string> name;                 // replaces the role in the header if non-empty
    std::optional<std::string> content;              // string content; nullopt = none
    std::optional<std::vector<ContentPart>> parts;   // list content (used instead of content if set)
    std::vector<ToolCallOut> tool_calls;             // assistant (id e.g. "functions.get_weather:0")
    std::string tool_call_id;                        // tool
};

struct ChatOptions {
    bool add_generation_prompt = false;
    // false (server default): text inside messages is plain text even if it spells a special
    // token. true: like HF apply_chat_template(tokenize=True) — such text becomes the control token.
    bool allow_special_in_content = false;
};

struct ParsedToolCalls {
    std::string content;              // text before the tool-call section (all of it if none)
    std::vector<ToolCallOut> calls;   // complete calls, in order
    bool has_section = false;         // a <|tool_calls_section_begin|> was seen
};

// OpenAI-style messages JSON -> ChatMessage (throws kimi::Error on a malformed message).
// Non-string tool-call arguments are serialized like Python json.dumps (insertion order).
std::vector<ChatMessage> chat_messages_from_json(const nlohmann::ordered_json& messages);

// The Kimi Linear chat format; markers are emitted as special ids. tools: a JSON array (or
// null); it is key-sorted recursively and written as compact JSON, like tokenization_kimi.py.
tok::ChatPrompt render_kimi_linear(const tok::Tokenizer& t, const std::vector<ChatMessage>& messages,
                                   const nlohmann::ordered_json& tools, const ChatOptions& opts = {});

// Token-level parser: the markers are recognized only as their special ids.
ParsedToolCalls parse_tool_calls(const tok::Tokenizer& t, std::span<const int32_t> ids);
// Text-level parser (markers as text), the rule vLLM's kimi_k2 tool parser uses.
ParsedToolCalls parse_tool_calls_text(std::string_view text);

// The Kimi Linear format behind the ChatFormat interface (kimi_linear_format.cpp).
std::unique_ptr<ChatFormat> kimi_linear_format(const tok::Tokenizer& t);

}   // namespace kimi::chat
