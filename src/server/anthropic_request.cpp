// Anthropic Messages request → chat-completions body (see anthropic_request.h).
// ref: docs/server.md#anthropic (the field table), Anthropic's Messages API reference.
#include "server/anthropic_request.h"

#include <unordered_map>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;
using body::at;
using body::field;
using body::opt_str;
using body::str;
using body::top;

// The tool_use ids of the request so far → their tool names.
using ToolNames = std::unordered_map<std::string, std::string>;

const std::string& block_type(const J& block, const std::string& where) {
    if (!block.is_object()) throw bad_param(top(where), where + " must be a content block object");
    return str(block, "type", where);
}

// An image block's source → an OpenAI image part (the media loader reads data: URLs).
J image_part(const J& block, const std::string& where) {
    const J* src = field(block, "source");
    if (!src || !src->is_object()) throw bad_param(top(where), where + ".source must be an object");
    const std::string& type = str(*src, "type", where + ".source");
    if (type == "base64")
        return {{"type", "image_url"},
                {"image_url",
                 {{"url",
                   "data:" + str(*src, "media_type", where + ".source") + ";base64," +
                       str(*src, "data", where + ".source")}}}};
    if (type == "url") return {{"type", "image_url"}, {"image_url", {{"url", str(*src, "url", where + ".source")}}}};
    throw bad_param(top(where),
                    where + ".source.type must be \"base64\" or \"url\", got \"" + type.substr(0, 40) + "\"");
}

// A string, or text and image blocks → a content string (text only) or a list of parts.
J user_parts(const J& content, const std::string& where) {
    if (content.is_string()) return content;
    if (!content.is_array()) throw bad_param(top(where), where + " must be a string or an array of content blocks");
    J parts = J::array();
    bool any_image = false;
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string w = at(where, i);
        const std::string& type = block_type(content[i], w);
        if (type == "text") {
            parts.push_back({{"type", "text"}, {"text", str(content[i], "text", w)}});
        } else if (type == "image") {
            parts.push_back(image_part(content[i], w));
            any_image = true;
        } else {
            throw bad_param(top(where),
                            w + ": a content block of type \"" + type.substr(0, 40) + "\" is not supported here");
        }
    }
    if (any_image) return parts;
    std::string text;   // text blocks only: one string, as a client's plain string would render
    for (const J& p : parts) text += p["text"].get_ref<const std::string&>();
    return text;
}

// A user message: its tool_result blocks become tool messages, the rest one user message. A
// result also carries its tool's name as `tool` (K3 names each result by it), or its id when no
// earlier tool_use has it: an agent that trimmed its history still sends such results.
void add_user(const J& content, const std::string& where, const ToolNames& tools, J& out) {
    if (content.is_string()) {
        out.push_back({{"role", "user"}, {"content", content}});
        return;
    }
    if (!content.is_array()) throw bad_param("messages", where + " must be a string or an array of content blocks");
    J rest = J::array();
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string w = at(where, i);
        if (block_type(content[i], w) != "tool_result") {
            rest.push_back(content[i]);
            continue;
        }
        const J& b = content[i];
        const std::string& id = str(b, "tool_use_id", w);
        const auto known = tools.find(id);
        J msg = {{"role", "tool"}, {"tool_call_id", id}, {"tool", known != tools.end() ? known->second : id}};
        const J* c = field(b, "content");
        msg["content"] = c ? user_parts(*c, w + ".content") : J("");
        if (const J* e = field(b, "is_error"); e && !e->is_boolean())
            throw bad_param("messages", w + ".is_error must be a boolean");
        out.push_back(std::move(msg));
    }
    if (!rest.empty()) out.push_back({{"role", "user"}, {"content", user_parts(rest, where)}});
}

// An assistant message: text → content, thinking → reasoning_content, tool_use → tool_calls.
// A tool_use id used twice is a 400: the results could not be matched to their calls.
void add_assistant(const J& content, const std::string& where, ToolNames& tools, J& out) {
    if (content.is_string()) {
        out.push_back({{"role", "assistant"}, {"content", content}});
        return;
    }
    if (!content.is_array()) throw bad_param("messages", where + " must be a string or an array of content blocks");
    std::string text, reasoning;
    J calls = J::array();
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string w = at(where, i);
        const J& b = content[i];
        const std::string& type = block_type(b, w);
        if (type == "text") {
            text += str(b, "text", w);
        } else if (type == "thinking") {
            reasoning += str(b, "thinking", w);
        } else if (type == "redacted_thinking") {
            continue;   // opaque to this model
        } else if (type == "tool_use") {
            const J* input = field(b, "input");
            if (!input || !input->is_object()) throw bad_param("messages", w + ".input must be an object");
            const std::string &id = str(b, "id", w), &name = str(b, "name", w);
            if (!tools.emplace(id, name).second)
                throw bad_param("messages", w + ": tool_use id \"" + id.substr(0, 100) + "\" is used twice");
            calls.push_back(
                {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", input->dump()}}}});
        } else {
            throw bad_param("messages",
                            w + ": a content block of type \"" + type.substr(0, 40) +
                                "\" is not supported in an assistant message");
        }
    }
    J msg = {{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    out.push_back(std::move(msg));
}

J system_text(const J& s) {
    if (s.is_string()) return s;
    if (!s.is_array()) throw bad_param("system", "system must be a string or an array of text blocks");
    std::string text;
    for (size_t i = 0; i < s.size(); ++i) {
        const std::string w = at("system", i);
        if (block_type(s[i], w) != "text") throw bad_param("system", w + " must be a text block");
        if (!text.empty()) text += "\n";
        text += str(s[i], "text", w);
    }
    return text;
}

J tools_json(const J& tools) {
    if (!tools.is_array()) throw bad_param("tools", "tools must be an array");
    J out = J::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string w = at("tools", i);
        const J& t = tools[i];
        if (!t.is_object()) throw bad_param("tools", w + " must be an object");
        if (const J* type = field(t, "type"); type && *type != "custom")
            throw bad_param("tools",
                            w + ": only client tools (name, description, input_schema) are supported, not " +
                                type->dump().substr(0, 60));
        J fn = {{"name", str(t, "name", w)}};
        if (const std::string* d = opt_str(t, "description", w)) fn["description"] = *d;
        const J* schema = field(t, "input_schema");
        if (!schema || !schema->is_object()) throw bad_param("tools", w + ".input_schema must be an object");
        fn["parameters"] = *schema;
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
}

// tool_choice {type: auto | any | tool (name) | none, disable_parallel_tool_use} → chat fields.
void tool_choice(const J& tc, J& chat) {
    if (!tc.is_object()) throw bad_param("tool_choice", "tool_choice must be an object with a type");
    const std::string& type = str(tc, "type", "tool_choice");
    if (type == "auto")
        chat["tool_choice"] = "auto";
    else if (type == "any")
        chat["tool_choice"] = "required";
    else if (type == "none")
        chat["tool_choice"] = "none";
    else if (type == "tool")
        chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", str(tc, "name", "tool_choice")}}}};
    else
        throw bad_param("tool_choice", "tool_choice.type must be auto, any, tool or none");
    if (const J* p = field(tc, "disable_parallel_tool_use")) {
        if (!p->is_boolean()) throw bad_param("tool_choice", "tool_choice.disable_parallel_tool_use must be a boolean");
        if (type == "any" || type == "tool") chat["parallel_tool_calls"] = !p->get<bool>();
    }
}

void thinking(const J& t, J& chat) {
    if (!t.is_object()) throw bad_param("thinking", "thinking must be an object with a type");
    const std::string& type = str(t, "type", "thinking");
    J kw = J::object();
    if (type == "disabled") {
        kw["thinking"] = false;
    } else if (type == "enabled" || type == "adaptive") {
        kw["thinking"] = true;
        if (const J* b = field(t, "budget_tokens")) {
            if (!b->is_number_integer() || b->get<int64_t>() < 1024)
                throw bad_param("thinking", "thinking.budget_tokens must be an integer of at least 1024");
            kw["thinking_effort"] = effort_for_budget(b->get<int64_t>());
        } else if (type == "enabled") {
            throw bad_param("thinking", "thinking.budget_tokens is required when thinking is enabled");
        }
    } else {
        throw bad_param("thinking", "thinking.type must be enabled, disabled or adaptive");
    }
    chat["chat_template_kwargs"] = std::move(kw);
}

}   // namespace

const char* effort_for_budget(int64_t budget_tokens) {
    return budget_tokens < 4096 ? "low" : budget_tokens < 16384 ? "high" : "max";
}

MessagesRequest messages_to_chat(const J& b, bool count_only) {
    if (!b.is_object()) throw ApiError(400, "the request body must be a JSON object");
    MessagesRequest r;
    J& chat = r.chat;
    chat = J::object();
    const J* model = field(b, "model");
    if (!model) throw ApiError(400, "model: Field required", "model", "missing_required_parameter");
    chat["model"] = *model;
    if (const J* mt = field(b, "max_tokens"))
        chat["max_tokens"] = *mt;
    else if (!count_only)
        throw ApiError(400, "max_tokens: Field required", "max_tokens", "missing_required_parameter");
    J msgs = J::array();
    if (const J* s = field(b, "system")) msgs.push_back({{"role", "system"}, {"content", system_text(*s)}});
    const J* in = field(b, "messages");
    if (!in) throw ApiError(400, "messages: Field required", "messages", "missing_required_parameter");
    if (!in->is_array() || in->empty()) throw bad_param("messages", "messages must be a non-empty array");
    ToolNames tools;
    for (size_t i = 0; i < in->size(); ++i) {
        const std::string w = at("messages", i);
        const J& m = (*in)[i];
        if (!m.is_object()) throw bad_param("messages", w + " must be an object");
        const std::string& role = str(m, "role", w);
        const J* content = field(m, "content");
        if (!content) throw bad_param("messages", w + ".content is required");
        if (role == "user")
            add_user(*content, w + ".content", tools, msgs);
        else if (role == "assistant")
            add_assistant(*content, w + ".content", tools, msgs);
        else
            throw bad_param("messages",
                            w + ".role must be \"user\" or \"assistant\", got \"" + role.substr(0, 40) + "\"");
    }
    chat["messages"] = std::move(msgs);
    if (const J* t = field(b, "tools"); t && !(t->is_array() && t->empty())) chat["tools"] = tools_json(*t);
    if (const J* tc = field(b, "tool_choice")) tool_choice(*tc, chat);
    if (const J* t = field(b, "thinking")) thinking(*t, chat);
    if (const J* s = field(b, "stop_sequences")) {
        if (!s->is_array()) throw bad_param("stop_sequences", "stop_sequences must be an array of strings");
        for (const J& v : *s) {
            if (!v.is_string() || v.get_ref<const std::string&>().empty())
                throw bad_param("stop_sequences", "stop_sequences must be non-empty strings");
            r.stop_sequences.push_back(v.get<std::string>());
        }
        if (!s->empty()) chat["stop"] = *s;
    }
    if (const J* m = field(b, "metadata"); m && !m->is_object())
        throw bad_param("metadata", "metadata must be an object");
    // Anthropic's sampling fields, and vLLM's extra ones a client may add (the same names and
    // checks as on /v1/chat/completions).
    for (const char* k : {"temperature", "top_p", "top_k", "seed", "ignore_eos", "min_p", "repetition_penalty",
                          "presence_penalty", "frequency_penalty"})
        if (const J* v = field(b, k)) chat[k] = *v;
    if (const J* s = field(b, "stream"); s && !count_only) {
        if (!s->is_boolean()) throw bad_param("stream", "stream must be a boolean");
        r.stream = s->get<bool>();
    }
    return r;
}

}   // namespace kimi::server
