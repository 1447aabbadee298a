// Anthropic Messages request → chat-completions body (see anthropic_request.h).
// ref: docs/server.md#anthropic (the field table), Anthropic's Messages API reference.
#include "server/anthropic_request.h"

#include <unordered_map>
#include <unordered_set>

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

// The tool_use ids of the request so far → their tool names and the ids the prompt renders.
// A reply's tool_use ids are unique (toolu_…), which the model never wrote; the prompt shows
// each call as the model writes one, functions.NAME:N with N counting the conversation's calls
// (Kimi Linear renders the ids; K3 renders none).
struct ToolUse {
    std::string name, prompt_id;
};
using ToolNames = std::unordered_map<std::string, ToolUse>;
// The tools a tool_reference block names (tools with defer_loading join the prompt then).
using Referenced = std::unordered_set<std::string>;

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

// A string, or text and image blocks → a content string (text only) or a list of parts. A
// tool_reference block (Claude Code's tool search, inside a tool_result) is its tool's name.
J user_parts(const J& content, const std::string& where, Referenced& referenced) {
    if (content.is_string()) return content;
    if (!content.is_array()) throw bad_param(top(where), where + " must be a string or an array of content blocks");
    J parts = J::array();
    bool any_image = false;
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string w = at(where, i);
        const std::string& type = block_type(content[i], w);
        if (type == "text") {
            parts.push_back({{"type", "text"}, {"text", str(content[i], "text", w)}});
        } else if (type == "tool_reference") {
            const std::string& name = str(content[i], "tool_name", w);
            referenced.insert(name);
            parts.push_back({{"type", "text"}, {"text", name}});
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
void add_user(const J& content, const std::string& where, const ToolNames& tools, Referenced& referenced, J& out) {
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
        J msg = known != tools.end()
            ? J{{"role", "tool"}, {"tool_call_id", known->second.prompt_id}, {"tool", known->second.name}}
            : J{{"role", "tool"}, {"tool_call_id", id}, {"tool", id}};
        const J* c = field(b, "content");
        msg["content"] = c ? user_parts(*c, w + ".content", referenced) : J("");
        if (const J* e = field(b, "is_error"); e && !e->is_boolean())
            throw bad_param("messages", w + ".is_error must be a boolean");
        out.push_back(std::move(msg));
    }
    if (!rest.empty()) out.push_back({{"role", "user"}, {"content", user_parts(rest, where, referenced)}});
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
            const std::string prompt_id = "functions." + name + ":" + std::to_string(tools.size());
            if (!tools.emplace(id, ToolUse{name, prompt_id}).second)
                throw bad_param("messages", w + ": tool_use id \"" + id.substr(0, 100) + "\" is used twice");
            calls.push_back({{"id", prompt_id},
                             {"type", "function"},
                             {"function", {{"name", name}, {"arguments", input->dump()}}}});
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

// Claude Code's first system block: "x-anthropic-billing-header: cc_version=…; cc_entrypoint=…;",
// different with every prompt. Anthropic's API reads it as metadata; in a prompt it would sit
// at the very start and keep the prefix cache from ever hitting, so it is dropped.
bool billing_header(std::string_view text) { return text.rfind("x-anthropic-billing-header:", 0) == 0; }

// A system prompt (the top-level `system`, or a `system` message's content): a string or text
// blocks (cache_control ignored), joined by newlines, without the billing header.
std::string system_text(const J& s, const std::string& where) {
    if (s.is_string()) {
        std::string_view t = s.get_ref<const std::string&>();
        if (billing_header(t)) t = t.substr(std::min(t.size(), t.find('\n') + 1));   // its line
        return std::string(t);
    }
    if (!s.is_array()) throw bad_param(top(where), where + " must be a string or an array of text blocks");
    std::string text;
    for (size_t i = 0; i < s.size(); ++i) {
        const std::string w = at(where, i);
        if (block_type(s[i], w) != "text") throw bad_param(top(where), w + " must be a text block");
        const std::string& t = str(s[i], "text", w);
        if (billing_header(t)) continue;
        if (!text.empty()) text += "\n";
        text += t;
    }
    return text;
}

// Client tools → function tools. Anthropic's server tools (web_search_…, code_execution_…,
// web_fetch_…, …: a `type` other than "custom") run on Anthropic's servers; this one runs none,
// and the model cannot call what nothing runs, so they are left out (named in left_out). A tool
// with defer_loading joins the prompt once a tool_reference names it (tool search).
J tools_json(const J& tools, const Referenced& referenced, std::vector<std::string>& left_out) {
    if (!tools.is_array()) throw bad_param("tools", "tools must be an array");
    J out = J::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string w = at("tools", i);
        const J& t = tools[i];
        if (!t.is_object()) throw bad_param("tools", w + " must be an object");
        if (const std::string* type = opt_str(t, "type", w); type && *type != "custom") {
            const std::string* name = opt_str(t, "name", w);
            left_out.push_back((name ? *name + " (" : "(") + type->substr(0, 60) + ")");
            continue;
        }
        if (const J* d = field(t, "defer_loading")) {
            if (!d->is_boolean()) throw bad_param("tools", w + ".defer_loading must be a boolean");
            if (d->get<bool>() && !referenced.count(str(t, "name", w))) continue;
        }
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

// output_config: effort (low | medium | high | max) → the K3 thinking effort, unless thinking
// is off; format (a JSON schema) → response_format.
void output_config(const J& oc, J& chat) {
    if (!oc.is_object()) throw bad_param("output_config", "output_config must be an object");
    if (const std::string* e = opt_str(oc, "effort", "output_config")) {
        static const std::unordered_map<std::string, const char*> efforts = {
            {"low", "low"}, {"medium", "high"}, {"high", "max"}, {"max", "max"}};
        const auto it = efforts.find(*e);
        if (it == efforts.end())
            throw bad_param("output_config", "output_config.effort must be low, medium, high or max");
        J& kw = chat["chat_template_kwargs"];
        if (!kw.is_object()) kw = J::object();
        const auto on = kw.find("thinking");
        if (on == kw.end() || *on != false) kw["thinking_effort"] = it->second;
    }
    if (const J* f = body::opt_obj(oc, "format", "output_config")) {
        if (str(*f, "type", "output_config.format") != "json_schema")
            throw bad_param("output_config", "output_config.format.type must be json_schema");
        const J* schema = body::opt_obj(*f, "schema", "output_config.format");
        if (!schema) throw bad_param("output_config", "output_config.format.schema is required");
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", *schema}}}};
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
    if (const J* s = field(b, "system")) msgs.push_back({{"role", "system"}, {"content", system_text(*s, "system")}});
    const J* in = field(b, "messages");
    if (!in) throw ApiError(400, "messages: Field required", "messages", "missing_required_parameter");
    if (!in->is_array() || in->empty()) throw bad_param("messages", "messages must be a non-empty array");
    ToolNames tools;
    Referenced referenced;
    for (size_t i = 0; i < in->size(); ++i) {
        const std::string w = at("messages", i);
        const J& m = (*in)[i];
        if (!m.is_object()) throw bad_param("messages", w + " must be an object");
        const std::string& role = str(m, "role", w);
        const J* content = field(m, "content");
        if (!content) throw bad_param("messages", w + ".content is required");
        if (role == "user")
            add_user(*content, w + ".content", tools, referenced, msgs);
        else if (role == "assistant")
            add_assistant(*content, w + ".content", tools, msgs);
        else if (role == "system")   // Claude Code's, in place (rendered as the format renders one)
            msgs.push_back({{"role", "system"}, {"content", system_text(*content, w + ".content")}});
        else
            throw bad_param(
                "messages",
                w + ".role must be \"user\", \"assistant\" or \"system\", got \"" + role.substr(0, 40) + "\"");
    }
    chat["messages"] = std::move(msgs);
    if (const J* t = field(b, "tools"); t && !(t->is_array() && t->empty())) {
        J fns = tools_json(*t, referenced, r.left_out);
        if (!fns.empty()) chat["tools"] = std::move(fns);
    }
    if (const J* tc = field(b, "tool_choice")) tool_choice(*tc, chat);
    if (const J* t = field(b, "thinking")) thinking(*t, chat);
    if (const J* oc = field(b, "output_config")) output_config(*oc, chat);
    if (const J* cm = field(b, "context_management"); cm && !cm->is_object())   // accepted, nothing to manage
        throw bad_param("context_management", "context_management must be an object");
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
