// OpenAI Responses request → chat-completions body (see responses_request.h).
// ref: docs/server.md#responses (the field table), OpenAI's Responses API reference.
#include "server/responses_request.h"

#include "core/base64.h"
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

// A content list of input_text / output_text / input_image parts → a string (text only) or parts.
J content_parts(const J& content, const std::string& where) {
    if (content.is_string()) return content;
    if (!content.is_array()) throw bad_param(top(where), where + " must be a string or an array of content parts");
    J parts = J::array();
    std::string text;
    bool any_image = false;
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string w = at(where, i);
        const J& p = content[i];
        if (!p.is_object()) throw bad_param(top(where), w + " must be an object");
        const std::string& type = str(p, "type", w);
        if (type == "input_text" || type == "output_text" || type == "text" || type == "summary_text" ||
            type == "reasoning_text") {
            parts.push_back({{"type", "text"}, {"text", str(p, "text", w)}});
            text += str(p, "text", w);
        } else if (type == "refusal") {
            parts.push_back({{"type", "text"}, {"text", str(p, "refusal", w)}});
            text += str(p, "refusal", w);
        } else if (type == "input_image") {
            if (field(p, "file_id"))
                throw bad_param(top(where), w + ": file_id images are not supported (send image_url)");
            parts.push_back({{"type", "image_url"}, {"image_url", {{"url", str(p, "image_url", w)}}}});
            any_image = true;
        } else {
            throw bad_param(top(where), w + ": a content part of type \"" + type.substr(0, 40) + "\" is not supported");
        }
    }
    return any_image ? parts : J(text);
}

// The text of a part list (assistant content, reasoning).
std::string text_of(const J& content, const std::string& where) {
    const J c = content_parts(content, where);
    if (!c.is_string()) throw bad_param(top(where), where + " must hold text only");
    return c.get<std::string>();
}

// The input items → chat messages (appended to out). Reasoning items wait for the assistant turn
// they belong to (and are dropped when none follows: a reply cut short); function_call items join
// the assistant message before them.
void add_items(const J& input, J& out) {
    std::string reasoning;
    auto assistant = [&]() -> J& {   // the open assistant turn (one with no tool result after it)
        if (out.empty() || out.back()["role"] != "assistant") out.push_back({{"role", "assistant"}, {"content", ""}});
        J& m = out.back();
        if (!reasoning.empty()) {
            m["reasoning_content"] = m.value("reasoning_content", std::string()) + reasoning;
            reasoning.clear();
        }
        return m;
    };
    for (size_t i = 0; i < input.size(); ++i) {
        const std::string w = at("input", i);
        const J& item = input[i];
        if (!item.is_object()) throw bad_param("input", w + " must be an object");
        const std::string* t = opt_str(item, "type", w);
        const std::string type = t ? *t : "message";
        if (type == "message") {
            const std::string& role = str(item, "role", w);
            const J* content = field(item, "content");
            if (!content) throw bad_param("input", w + ".content is required");
            if (role == "assistant") {
                J& m = assistant();
                if (m.contains("tool_calls")) {   // text after calls: a new turn
                    out.push_back({{"role", "assistant"}, {"content", ""}});
                }
                J& cur = out.back();
                cur["content"] = cur["content"].get<std::string>() + text_of(*content, w + ".content");
            } else if (role == "user" || role == "system" || role == "developer") {
                reasoning.clear();   // reasoning with no assistant output after it (a cut reply): dropped
                out.push_back({{"role", role}, {"content", content_parts(*content, w + ".content")}});
            } else {
                throw bad_param("input", w + ".role must be user, assistant, system or developer");
            }
        } else if (type == "function_call" || type == "custom_tool_call") {
            // a custom tool's raw input is the one argument of the function the prompt shows
            const std::string args =
                type == "function_call" ? str(item, "arguments", w) : J{{"input", str(item, "input", w)}}.dump();
            J& m = assistant();
            if (!m.contains("tool_calls")) m["tool_calls"] = J::array();
            m["tool_calls"].push_back({{"id", str(item, "call_id", w)},
                                       {"type", "function"},
                                       {"function", {{"name", str(item, "name", w)}, {"arguments", args}}}});
        } else if (type == "function_call_output" || type == "custom_tool_call_output") {
            const J* o = field(item, "output");
            if (!o) throw bad_param("input", w + ".output is required");
            reasoning.clear();
            out.push_back({{"role", "tool"},
                           {"tool_call_id", str(item, "call_id", w)},
                           {"content", content_parts(*o, w + ".output")}});
        } else if (type == "reasoning") {
            const J* c = field(item, "content");
            const J* s = field(item, "summary");
            const std::string* token = opt_str(item, "encrypted_content", w);
            const std::optional<std::string> restored = token ? reasoning_from_token(*token) : std::nullopt;
            if (c && !(c->is_array() && c->empty()))
                reasoning += text_of(*c, w + ".content");
            else if (restored)   // sent back as it came (store: false): the reasoning exactly
                reasoning += *restored;
            else if (s)
                reasoning += text_of(*s, w + ".summary");
        } else {
            throw bad_param("input", w + ": an input item of type \"" + type.substr(0, 40) + "\" is not supported");
        }
    }
}

// Function tools → the chat body's tools. A custom (freeform) tool is a function of one string
// argument, `input`, whose value is the tool's raw input (named in custom). A hosted tool
// (web_search, file_search, code_interpreter, image_generation, …) runs on OpenAI's servers;
// nothing here runs it, and the model cannot call what nothing runs, so it is left out (named in
// left_out).
J tools_json(const J& tools, std::vector<std::string>& custom, std::vector<std::string>& left_out) {
    if (!tools.is_array()) throw bad_param("tools", "tools must be an array");
    J out = J::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string w = at("tools", i);
        const J& t = tools[i];
        if (!t.is_object()) throw bad_param("tools", w + " must be an object");
        const std::string& type = str(t, "type", w);
        if (type == "custom") {
            J fn = {{"name", str(t, "name", w)}};
            if (const std::string* d = opt_str(t, "description", w)) fn["description"] = *d;
            J input = {{"type", "string"}, {"description", "the tool's raw input"}};
            // format: a regex grammar becomes the string's pattern (a forced call follows it); a
            // Lark grammar has no compiler here, so the input is free text
            if (const J* f = body::opt_obj(t, "format", w); f && f->value("syntax", J()) == "regex")
                input["pattern"] = str(*f, "definition", w + ".format");
            fn["parameters"] = {{"type", "object"}, {"properties", {{"input", input}}}, {"required", {"input"}}};
            custom.push_back(fn["name"]);
            out.push_back({{"type", "function"}, {"function", std::move(fn)}});
            continue;
        }
        if (type != "function") {
            left_out.push_back(type.substr(0, 60));
            continue;
        }
        J fn = {{"name", str(t, "name", w)}};
        if (const std::string* d = opt_str(t, "description", w)) fn["description"] = *d;
        const J* params = body::opt_obj(t, "parameters", w);
        fn["parameters"] = params ? *params : J{{"type", "object"}};
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
}

J tool_choice(const J& tc) {
    if (tc.is_string()) {
        if (tc != "auto" && tc != "none" && tc != "required")
            throw bad_param("tool_choice",
                            "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
        return tc;
    }
    if (!tc.is_object() || str(tc, "type", "tool_choice") != "function")
        throw bad_param("tool_choice",
                        "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
    return {{"type", "function"}, {"function", {{"name", str(tc, "name", "tool_choice")}}}};
}

// text.format → response_format.
J response_format(const J& text) {
    if (!text.is_object()) throw bad_param("text", "text must be an object");
    const J* f = field(text, "format");
    if (!f) return nullptr;
    if (!f->is_object()) throw bad_param("text", "text.format must be an object");
    const std::string& type = str(*f, "type", "text.format");
    if (type == "text") return nullptr;
    if (type == "json_object") return {{"type", "json_object"}};
    if (type != "json_schema") throw bad_param("text", "text.format.type must be text, json_object or json_schema");
    const J* schema = field(*f, "schema");
    if (!schema) throw bad_param("text", "text.format.schema is required");
    const std::string* name = opt_str(*f, "name", "text.format");
    J js = {{"name", name ? *name : "response"}, {"schema", *schema}};
    if (const J* s = field(*f, "strict")) {
        if (!s->is_boolean()) throw bad_param("text", "text.format.strict must be a boolean");
        js["strict"] = *s;
    }
    return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// The request's fields as a response object repeats them (checked by now), null or absent as
// the default.
J echo_fields(const J& b, bool store) {
    auto given = [](const J& o, const char* k, J def) {
        const J* v = o.is_object() ? field(o, k) : nullptr;
        return v ? *v : def;
    };
    return {{"instructions", given(b, "instructions", nullptr)},
            {"max_output_tokens", given(b, "max_output_tokens", nullptr)},
            {"metadata", given(b, "metadata", J::object())},
            {"parallel_tool_calls", given(b, "parallel_tool_calls", true)},
            {"previous_response_id", given(b, "previous_response_id", nullptr)},
            {"reasoning", {{"effort", given(given(b, "reasoning", nullptr), "effort", nullptr)}, {"summary", nullptr}}},
            {"store", store},
            {"temperature", given(b, "temperature", 1.0)},
            {"text", given(b, "text", {{"format", {{"type", "text"}}}})},
            {"tool_choice", given(b, "tool_choice", "auto")},
            {"tools", given(b, "tools", J::array())},
            {"top_p", given(b, "top_p", 1.0)}};
}

}   // namespace

constexpr std::string_view kReasoningToken = "kimi-reasoning-v1:";

std::string reasoning_token(const std::string& text) { return std::string(kReasoningToken) + base64_encode(text); }

std::optional<std::string> reasoning_from_token(const std::string& token) {
    if (token.rfind(kReasoningToken, 0) != 0) return std::nullopt;
    return base64_decode(std::string_view(token).substr(kReasoningToken.size()));
}

std::optional<std::pair<bool, const char*>> thinking_for_effort(const std::string& e) {
    if (e == "none") return std::make_pair(false, "low");
    if (e == "minimal" || e == "low") return std::make_pair(true, "low");
    if (e == "medium") return std::make_pair(true, "high");
    if (e == "high" || e == "xhigh") return std::make_pair(true, "max");
    return std::nullopt;
}

std::optional<std::string> previous_response_id(const J& b) {
    const J* p = b.is_object() ? field(b, "previous_response_id") : nullptr;
    if (!p) return std::nullopt;
    if (!p->is_string()) throw bad_param("previous_response_id", "previous_response_id must be a string");
    return p->get<std::string>();
}

ResponsesRequest responses_to_chat(const J& b, const J& previous) {
    if (!b.is_object()) throw ApiError(400, "the request body must be a JSON object");
    ResponsesRequest r;
    J& chat = r.chat;
    chat = J::object();
    if (const J* m = field(b, "model")) chat["model"] = *m;
    r.conversation = previous.is_array() ? previous : J::array();
    const J* input = field(b, "input");
    if (!input) throw ApiError(400, "input is required", "input", "missing_required_parameter");
    if (input->is_string())
        r.conversation.push_back({{"role", "user"}, {"content", *input}});
    else if (input->is_array())
        add_items(*input, r.conversation);
    else
        throw bad_param("input", "input must be a string or an array of input items");
    J msgs = J::array();
    if (const J* ins = field(b, "instructions")) {
        if (!ins->is_string()) throw bad_param("instructions", "instructions must be a string");
        msgs.push_back({{"role", "system"}, {"content", *ins}});
    }
    for (const J& m : r.conversation) msgs.push_back(m);
    if (msgs.empty()) throw bad_param("input", "input must not be empty");
    chat["messages"] = std::move(msgs);
    if (const J* t = field(b, "tools"); t && !(t->is_array() && t->empty())) {
        J fns = tools_json(*t, r.custom_tools, r.left_out);
        if (!fns.empty()) chat["tools"] = std::move(fns);
    }
    if (const J* tc = field(b, "tool_choice")) chat["tool_choice"] = tool_choice(*tc);
    if (const J* p = field(b, "parallel_tool_calls")) {
        if (!p->is_boolean()) throw bad_param("parallel_tool_calls", "parallel_tool_calls must be a boolean");
        chat["parallel_tool_calls"] = *p;
    }
    if (const J* mt = field(b, "max_output_tokens")) {   // named here: the chat path would say max_tokens
        if (!mt->is_number() || !(mt->get<double>() >= 1))
            throw bad_param("max_output_tokens", "max_output_tokens must be an integer of at least 1");
        chat["max_tokens"] = *mt;
    }
    for (const char* k : {"temperature", "top_p", "top_k", "seed", "ignore_eos", "min_p", "repetition_penalty",
                          "presence_penalty", "frequency_penalty"})
        if (const J* v = field(b, k)) chat[k] = *v;
    if (const J* rs = field(b, "reasoning")) {
        if (!rs->is_object()) throw bad_param("reasoning", "reasoning must be an object");
        if (const J* e = field(*rs, "effort")) {
            const auto t = e->is_string() ? thinking_for_effort(e->get<std::string>()) : std::nullopt;
            if (!t) throw bad_param("reasoning", "reasoning.effort must be none, minimal, low, medium, high or xhigh");
            chat["chat_template_kwargs"] = {{"thinking", t->first}, {"thinking_effort", t->second}};
        }
    }
    if (const J* t = field(b, "text")) {
        const J rf = response_format(*t);
        if (!rf.is_null()) chat["response_format"] = rf;
    }
    if (const J* m = field(b, "metadata"); m && !m->is_object())
        throw bad_param("metadata", "metadata must be an object");
    if (const J* s = field(b, "stream")) {
        if (!s->is_boolean()) throw bad_param("stream", "stream must be a boolean");
        r.stream = s->get<bool>();
    }
    if (const J* s = field(b, "store")) {
        if (!s->is_boolean()) throw bad_param("store", "store must be a boolean");
        r.store = s->get<bool>();
    }
    if (const J* inc = field(b, "include")) {   // extra data to return: the reasoning's is made, the rest has none here
        if (!inc->is_array()) throw bad_param("include", "include must be an array of strings");
        for (const J& v : *inc) {
            if (!v.is_string()) throw bad_param("include", "include must be an array of strings");
            r.encrypted_reasoning |= v == "reasoning.encrypted_content";
        }
    }
    for (const char* k : {"background", "conversation", "prompt"})
        if (const J* v = field(b, k); v && !(v->is_array() && v->empty()) && !(v->is_boolean() && !v->get<bool>()))
            throw ApiError(400, std::string(k) + " is not supported by this server", k, "unsupported_parameter");
    r.echo = echo_fields(b, r.store);
    return r;
}

}   // namespace kimi::server
