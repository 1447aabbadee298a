// Structured output fields of an OpenAI request → the grammar its reply must follow:
// response_format (json_object, json_schema), vLLM's structured_outputs {json, regex, choice,
// grammar, json_object} and the older guided_json / guided_regex / guided_choice /
// guided_grammar (at most one of them), and, for chat, tool_choice "required" or a named
// function (the model's native tool-call format, arguments following each tool's parameters).
// Chat replies are wrapped in the format's frame: Kimi Linear's reply is the body itself;
// Kimi-K3's think channel stays free text and the body goes in its response channel.
// Errors are 400s naming the field and the offending keyword. ref: docs/server.md.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace kimi::server {

// The constraint on a reply's text (no chat frame), or none.
// poll: called now and then while a large constraint compiles; it throws to stop the work.
std::optional<grammar::Grammar> parse_output_constraint(const nlohmann::ordered_json& body,
                                                        const grammar::CompilePoll& poll = {});

struct ForcedTools {
    std::vector<std::pair<std::string, nlohmann::ordered_json>> tools;   // name, parameters schema
    bool parallel = true;                                                // false: exactly one call
};

// tool_choice "required" or {"type": "function", "function": {"name"}} → the tools a call may
// use; nullopt for "auto", "none" or no tool_choice. tools: the request's tools array (or null).
std::optional<ForcedTools> parse_forced_tools(const nlohmann::ordered_json& body, const nlohmann::ordered_json& tools);

enum class ChatFrame { kNone, kKimiLinear, kK3 };

// The grammar of a whole reply: `body` (or forced tool calls) inside the frame. thinking: K3's
// generation prompt opened the think channel.
grammar::Grammar frame_grammar(ChatFrame frame, bool thinking, std::optional<grammar::Grammar> body,
                               const std::optional<ForcedTools>& tools, const grammar::CompilePoll& poll = {});

}   // namespace kimi::server
