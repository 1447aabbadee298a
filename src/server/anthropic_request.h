// The Anthropic Messages API's request body (POST /v1/messages, /v1/messages/count_tokens) as
// the OpenAI chat-completions body that the chat formats render (docs/server.md#anthropic):
// system → a system message; user text/image blocks → a user message; tool_result blocks →
// tool messages (before the user's other blocks; one whose tool_use_id no earlier tool_use has
// is accepted, a tool_use id used twice is a 400); assistant text/thinking/tool_use blocks →
// content, reasoning_content and tool_calls; tools with input_schema → function tools;
// tool_choice auto/any/tool/none; thinking enabled/disabled → the K3 think channel and its
// effort; stop_sequences → stop. Every field is type-checked (ApiError 400 naming it).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::server {

struct MessagesRequest {
    nlohmann::ordered_json chat;               // the chat-completions body
    std::vector<std::string> stop_sequences;   // as given (stop_reason "stop_sequence" names one)
    bool stream = false;
};

// count_only: /v1/messages/count_tokens (max_tokens not required, stream not read).
MessagesRequest messages_to_chat(const nlohmann::ordered_json& body, bool count_only);

// The K3 thinking effort a thinking budget maps to: < 4096 tokens "low", < 16384 "high", else "max".
const char* effort_for_budget(int64_t budget_tokens);

}   // namespace kimi::server
