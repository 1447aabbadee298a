// The OpenAI Responses API's request body (POST /v1/responses) as the chat-completions body the
// chat formats render (docs/server.md#responses): `input` (a string, or message,
// function_call, function_call_output and reasoning items) → chat messages after the stored
// conversation of `previous_response_id`; `instructions` → a system message first; flat
// function `tools`, `tool_choice`, `max_output_tokens`, `temperature`, `top_p`;
// `reasoning.effort` → K3's thinking effort; `text.format` → response_format (structured
// output). Every field is type-checked (ApiError 400 naming it). Hosted tools (web_search,
// file_search, code_interpreter, …) run on OpenAI's servers: left out of the prompt, noted.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::server {

struct ResponsesRequest {
    nlohmann::ordered_json chat;           // the chat-completions body
    nlohmann::ordered_json conversation;   // chat messages without the instructions (what `store` keeps)
    nlohmann::ordered_json echo;           // the request fields a response object repeats
    bool stream = false, store = true;
    // include: ["reasoning.encrypted_content"]: reasoning items carry their text in
    // encrypted_content (reasoning_token()), which restores it when a later request sends them
    // back (Codex runs with store: false and resends everything).
    bool encrypted_reasoning = false;
    std::vector<std::string> left_out;       // hosted tools (web_search, …) the prompt leaves out, for one log line
    std::vector<std::string> custom_tools;   // custom (freeform) tools: their calls are custom_tool_call items
};

// A reasoning item's encrypted_content: its text, encoded so that a later request restores it
// exactly. Not a secret (the text was in the reply already): an envelope with a version.
std::string reasoning_token(const std::string& text);
// The text of a reasoning_token; nullopt for anything else (another server's ciphertext).
std::optional<std::string> reasoning_from_token(const std::string& token);

// The previous response's id, if the body names one (read first: the caller looks it up).
std::optional<std::string> previous_response_id(const nlohmann::ordered_json& body);

// previous: the stored conversation of previous_response_id (chat messages), or null.
ResponsesRequest responses_to_chat(const nlohmann::ordered_json& body, const nlohmann::ordered_json& previous);

// reasoning.effort → K3's thinking: "none" off; "minimal" / "low" → low; "medium" → high;
// "high" / "xhigh" → max. nullopt for an unknown effort.
std::optional<std::pair<bool, const char*>> thinking_for_effort(const std::string& effort);

}   // namespace kimi::server
