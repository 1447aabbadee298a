// The Anthropic Messages API's request body (POST /v1/messages, /v1/messages/count_tokens) as
// the OpenAI chat-completions body that the chat formats render (docs/server.md#anthropic):
// system → a system message; user text/image blocks → a user message; tool_result blocks →
// tool messages (before the user's other blocks; one whose tool_use_id no earlier tool_use has
// is accepted, a tool_use id used twice is a 400); assistant text/thinking/tool_use blocks →
// content, reasoning_content and tool_calls; tools with input_schema → function tools;
// tool_choice auto/any/tool/none; thinking enabled/disabled/adaptive and output_config.effort
// → the K3 think channel and its effort; stop_sequences → stop. Every field is type-checked
// (ApiError 400 naming it).
//
// What agent programs send (docs/agents.md) is accepted as they send it: `system` messages
// inside `messages` (rendered in place), `tool_reference` blocks in a tool_result (their tool's
// name as text), tools with `defer_loading` (left out until a tool_reference names them),
// Anthropic's server tools (web search, code execution, …: left out, noted), `metadata`,
// `context_management`, `cache_control` anywhere (ignored). Claude Code's
// `x-anthropic-billing-header:` system block, whose text changes with every prompt at the very
// start of it, is dropped, so the prompt's prefix stays the same from turn to turn.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::server {

struct MessagesRequest {
    nlohmann::ordered_json chat;               // the chat-completions body
    std::vector<std::string> stop_sequences;   // as given (stop_reason "stop_sequence" names one)
    bool stream = false;
    std::vector<std::string> left_out;   // what the prompt leaves out (server tools), for one log line
};

// count_only: /v1/messages/count_tokens (max_tokens not required, stream not read).
MessagesRequest messages_to_chat(const nlohmann::ordered_json& body, bool count_only);

// The K3 thinking effort a thinking budget maps to: < 4096 tokens "low", < 16384 "high", else "max".
const char* effort_for_budget(int64_t budget_tokens);

}   // namespace kimi::server
