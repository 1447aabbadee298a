// Kimi-K3's conversation format ("XTML") rendered natively: the same text as K3's encoder
// (encoding_k3.py build_chat_segments, as tokenization_kimi.py apply_chat_template calls it
// with thinking_effort defaulting to "max"; llama.cpp's Kimi-K3.jinja port agrees), with the
// markers <|open|> <|close|> <|sep|> <|end_of_msg|> as special ids and all other text —
// tag names, attributes, content — as ordinary text. ref: docs/chat.md#k3-format.
#include "chat/k3_format.h"

#include "chat/prompt_builder.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "core/json_linear.h"
#include "tokenizer/py_json.h"

namespace kimi::chat {

namespace {

using J = nlohmann::ordered_json;

// Python's str() of an attribute value: strings as they are, integers in decimal.
std::string attr_str(const J& v, const std::string& what) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    throw Error(what + " must be a string");
}

// & → &amp; first, then " → &quot;
std::string escape_attr(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '&')
            out += "&amp;";
        else if (c == '"')
            out += "&quot;";
        else
            out += c;
    }
    return out;
}

// Python truthiness (nlohmann's empty() is false for every string, so strings are checked apart).
bool truthy(const J& v) {
    if (v.is_null()) return false;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();
    if (v.is_array() || v.is_object()) return !v.empty();
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_float()) return v.get<double>() != 0.0;
    return v.get<int64_t>() != 0;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\n\r\f\v") == std::string::npos; }

const J& get(const J& obj, const char* key) {
    static const J null_value;
    if (!obj.is_object()) return null_value;
    auto it = obj.find(key);
    return it == obj.end() ? null_value : *it;
}

// JSON with keys sorted at every level, compact, non-ASCII as is (encoding_k3 _json_compact of deep_sort_dict).
std::string sorted_json(const J& v) { return tok::py_json_dumps(v, true, true); }

struct Tags {
    PromptBuilder& b;
    const ImageResolver* images = nullptr;
    void open(const std::string& tag, std::initializer_list<std::pair<const char*, std::string>> attrs = {}) {
        b.special("<|open|>");
        b.text(tag);
        for (const auto& [k, v] : attrs) {
            b.text(" ");
            b.text(k);
            b.text("=\"");
            b.text(escape_attr(v));
            b.text("\"");
        }
        b.special("<|sep|>");
    }
    void close(const std::string& tag) {
        b.special("<|close|>");
        b.text(tag);
        b.special("<|sep|>");
    }
    void end_of_msg() { b.special("<|end_of_msg|>"); }
    // An internal system message (its body stripped, as the encoder does).
    void system(const char* type, const std::string& body) {
        open("message", {{"role", "system"}, {"type", type}});
        const size_t a = body.find_first_not_of(" \t\n\r\f\v"), z = body.find_last_not_of(" \t\n\r\f\v");
        if (a != std::string::npos) b.text(std::string_view(body).substr(a, z - a + 1));
        close("message");
        end_of_msg();
    }
};

bool is_image_part(const J& part) {
    const J& type = get(part, "type");
    return (type.is_string() && (type == "image" || type == "image_url")) || part.contains("image_url") ||
        part.contains("image");
}

// An image part: the processor's image prompt with its pad tokens expanded, or the placeholder
// text when no resolver is given (docs/chat.md#k3-images).
void render_image(Tags& t, const J& part, const std::string& where) {
    if (!t.images || !*t.images) {
        t.b.text(kImagePlaceholder);
        return;
    }
    const ImagePrompt img = (*t.images)(part, where);
    t.b.special("<|media_begin|>");
    t.b.text("image " + std::to_string(img.width) + "x" + std::to_string(img.height));
    t.b.special("<|media_content|>");
    for (int64_t i = 0; i < img.n_tokens; ++i) t.b.special("<|media_pad|>");
    t.b.special("<|media_end|>");
}

// A string, or the text and image parts of a list in order; null: nothing.
void render_content(Tags& t, const J& content, const std::string& where) {
    if (content.is_null()) return;
    if (content.is_string()) {
        t.b.text(content.get_ref<const std::string&>());
        return;
    }
    if (!content.is_array()) throw Error(where + ".content must be a string, a list of parts or null");
    for (size_t i = 0; i < content.size(); ++i) {
        const J& part = content[i];
        const std::string pw = where + ".content[" + std::to_string(i) + "]";
        if (!part.is_object()) throw Error(pw + " must be an object");
        if (is_image_part(part)) {
            render_image(t, part, pw);
            continue;
        }
        const J& text = get(part, "text");
        if (!text.is_string()) throw Error(pw + " has no text");
        t.b.text(text.get_ref<const std::string&>());
    }
}

void render_tool_declare(Tags& t, const J& tools, bool dynamic) {
    const std::string head = dynamic
        ? "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
          "You have access to all existing and extended tools.\n"
          "Here are the specs for the extended tools.\n\n```json\n"
        : "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n";
    t.open("message", {{"role", "system"}, {"type", "tool-declare"}});
    t.b.text(head + sorted_json(tools) + "\n```");
    t.close("message");
    t.end_of_msg();
}

const char* xtml_type(const J& v) {
    if (v.is_boolean()) return "boolean";
    if (v.is_null()) return "null";
    if (v.is_number()) return "number";
    if (v.is_string()) return "string";
    if (v.is_object()) return "object";
    return "array";
}

// The function object of a call ({"function": {...}} or the call itself), and its name.
const J& call_function(const J& call) {
    const J& fn = get(call, "function");
    return fn.is_object() ? fn : call;
}

void render_arguments(Tags& t, const J& args, bool parse_strings, const std::string& where) {
    const J* obj = args.is_object() ? &args : nullptr;
    J parsed;
    if (args.is_string() && parse_strings) {
        if (!json_depth_within(args.get_ref<const std::string&>()))
            throw Error(where + ": arguments nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        try {
            parsed = parse_json_linear(args.get_ref<const std::string&>());
        } catch (const nlohmann::json::exception&) {   // not JSON: written as text below
        }
        if (parsed.is_object()) obj = &parsed;
    }
    if (obj) {
        for (auto it = obj->begin(); it != obj->end(); ++it) {
            t.open("argument", {{"key", it.key()}, {"type", xtml_type(it.value())}});
            t.b.text(it->is_string() ? it->get<std::string>() : tok::py_json_dumps(*it, false, false));
            t.close("argument");
        }
    } else if (args.is_string()) {
        if (blank(args.get_ref<const std::string&>())) return;
        t.open("json", {{"type", "object"}});
        t.b.text(args.get_ref<const std::string&>());
        t.close("json");
    } else if (!args.is_null()) {
        throw Error(where + ".arguments must be a JSON object or a JSON object string");
    }
}

void render_assistant(Tags& t, const J& m, const ChatRequest& r, const std::string& where) {
    if (r.thinking) {
        t.open("think");
        const J& rc = get(m, "reasoning_content");
        const J& reasoning = truthy(rc) ? rc : get(m, "reasoning");
        if (reasoning.is_string() && !blank(reasoning.get_ref<const std::string&>()))
            t.b.text(reasoning.get_ref<const std::string&>());
        t.close("think");
    }
    t.open("response");
    render_content(t, get(m, "content"), where);
    t.close("response");
    const J& calls = get(m, "tool_calls");
    if (!truthy(calls)) return;
    if (!calls.is_array()) throw Error(where + ".tool_calls must be a list");
    t.open("tools");
    for (size_t i = 0; i < calls.size(); ++i) {
        const std::string cw = where + ".tool_calls[" + std::to_string(i) + "]";
        if (!calls[i].is_object()) throw Error(cw + " must be an object");
        const J& fn = call_function(calls[i]);
        const J& name = get(fn, "name");
        if (name.is_null()) throw Error(cw + " has no function name");
        t.open("call", {{"tool", attr_str(name, cw + ".function.name")}, {"index", std::to_string(i + 1)}});
        render_arguments(t, get(fn, "arguments"), r.parse_string_arguments, cw + ".function");
        t.close("call");
    }
    t.close("tools");
}

// Tool messages: a run of consecutive tool messages is emitted in the assistant's call order
// when every one of them matches a call by id; otherwise in its own order, each named by its
// `tool` / `name`, else by its position among the calls. `index` counts from the assistant.
struct ToolState {
    const J* calls = nullptr;   // the last assistant's tool_calls
    int64_t index = 0;
};

std::string call_id_of(const J& m) {
    const J& id = m.contains("tool_call_id") ? get(m, "tool_call_id") : get(m, "id");
    return id.is_null() ? std::string("\x01none") : attr_str(id, "tool_call_id");
}

void render_tool_message(Tags& t, ToolState& st, const J& m, const std::string* resolved, const std::string& where) {
    ++st.index;
    std::string name;
    bool have = false;
    if (resolved) {
        name = *resolved;
        have = true;
    } else {
        const J& n = m.contains("tool") ? get(m, "tool") : get(m, "name");
        if (!n.is_null()) {
            name = attr_str(n, where + ".name");
            have = true;
        } else if (st.calls && st.index <= int64_t(st.calls->size())) {
            const J& fname = get(call_function((*st.calls)[size_t(st.index - 1)]), "name");
            if (!fname.is_null()) {
                name = attr_str(fname, where + ": the matching call's name");
                have = true;
            }
        }
    }
    if (!have)
        throw Error(where +
                    ": a tool message needs a resolvable tool name: carry `tool`/`name`, a `tool_call_id` of the "
                    "preceding assistant's calls, or match a call by position");
    t.open("message", {{"role", "tool"}, {"tool", name}, {"index", std::to_string(st.index)}});
    render_content(t, get(m, "content"), where);
    t.close("message");
    t.end_of_msg();
}

void render_tool_run(Tags& t, ToolState& st, const J& msgs, size_t first, size_t last) {
    auto matches = [&](const J& m) {
        if (!st.calls) return false;
        const std::string id = call_id_of(m);
        for (const J& c : *st.calls)
            if (c.is_object() && !get(c, "id").is_null() && attr_str(get(c, "id"), "tool_calls[].id") == id)
                return true;
        return false;
    };
    bool all = true;
    for (size_t i = first; i < last; ++i) all = all && matches(msgs[i]);
    auto where = [](size_t i) { return "messages[" + std::to_string(i) + "]"; };
    if (!all) {
        for (size_t i = first; i < last; ++i) render_tool_message(t, st, msgs[i], nullptr, where(i));
        return;
    }
    std::vector<std::string> emitted;
    for (const J& c : *st.calls) {
        if (!c.is_object() || get(c, "id").is_null()) continue;
        const std::string id = attr_str(get(c, "id"), "tool_calls[].id");
        if (std::find(emitted.begin(), emitted.end(), id) != emitted.end()) continue;
        emitted.push_back(id);
        const J& fname = get(call_function(c), "name");
        const std::string name = fname.is_null() ? std::string() : attr_str(fname, "tool_calls[].function.name");
        for (size_t i = first; i < last; ++i)
            if (call_id_of(msgs[i]) == id)
                render_tool_message(t, st, msgs[i], fname.is_null() ? nullptr : &name, where(i));
    }
}

// The schema of a json_schema response_format: json_schema.schema, else json_schema.json_schema, else json_schema.
const J& response_schema(const J& rf) {
    const J& js = get(rf, "json_schema");
    if (js.is_object() && js.contains("schema")) return js["schema"];
    if (js.is_object() && js.contains("json_schema")) return js["json_schema"];
    return js;
}

}   // namespace

std::string image_prompt_text(const ImagePrompt& img) {
    std::string s =
        "<|media_begin|>image " + std::to_string(img.width) + "x" + std::to_string(img.height) + "<|media_content|>";
    for (int64_t i = 0; i < img.n_tokens; ++i) s += "<|media_pad|>";
    return s + "<|media_end|>";
}

tok::ChatPrompt K3Format::render(const ChatRequest& r) const {
    PromptBuilder b(tok_, r.allow_special_in_content);
    Tags t{b, &r.images};
    if (truthy(r.tools)) render_tool_declare(t, r.tools, false);
    if (r.thinking && r.thinking_effort) {
        const std::string& e = *r.thinking_effort;
        if (e != "low" && e != "high" && e != "max")
            throw Error("unsupported thinking_effort '" + e + "' (supported: low, high, max)");
        t.system(
            "thinking-effort",
            "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
            "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
            "`thinking_effort=" +
                e + "`.");
    }
    const J& msgs = r.messages;
    if (!msgs.is_array()) throw Error("messages must be a JSON array");
    ToolState st;
    for (size_t i = 0; i < msgs.size(); ++i) {
        const J& m = msgs[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw Error(where + " must be an object");
        const J& role_v = get(m, "role");
        if (!role_v.is_string()) throw Error(where + " has no role");
        const std::string& role = role_v.get_ref<const std::string&>();
        const J& name = get(m, "name");
        auto header = [&](const char* r0) {
            if (truthy(name))
                t.open("message", {{"role", r0}, {"name", attr_str(name, where + ".name")}});
            else
                t.open("message", {{"role", r0}});
        };
        if (role == "user" || (role == "system" && !truthy(get(m, "tools")))) {
            header(role.c_str());
            render_content(t, get(m, "content"), where);
            t.close("message");
            t.end_of_msg();
        } else if (role == "system") {
            render_tool_declare(t, get(m, "tools"), true);
        } else if (role == "assistant") {
            const J& calls = get(m, "tool_calls");
            st.calls = calls.is_array() ? &calls : nullptr;
            st.index = 0;
            header("assistant");
            render_assistant(t, m, r, where);
            t.close("message");
            t.end_of_msg();
        } else if (role == "tool") {
            if (i > 0 && msgs[i - 1].is_object() && get(msgs[i - 1], "role") == "tool") continue;   // part of a run
            size_t last = i;
            while (last < msgs.size() && msgs[last].is_object() && get(msgs[last], "role") == "tool") ++last;
            render_tool_run(t, st, msgs, i, last);
        }
        // other roles: not part of the format (the encoder skips them)
    }
    if (r.tool_choice == "required")
        t.system("tool-choice",
                 "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
    else if (r.tool_choice == "none")
        t.system("tool-choice",
                 "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.");
    const J& rf_type = r.response_format.is_object() ? get(r.response_format, "type") : r.response_format;
    static const std::string kRaw =
        "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting.";
    if (rf_type == "json_object") {
        t.system("response-format", "The system is invoked with `response_format=json_object`.\n" + kRaw);
    } else if (rf_type == "json_schema") {
        t.system("response-format",
                 "The system is invoked with `response_format=json_schema`.\n" + kRaw +
                     "\nThe JSON data must match the following schema:\n```json\n" +
                     sorted_json(response_schema(r.response_format)) + "\n```");
    }
    if (r.add_generation_prompt) {
        t.open("message", {{"role", "assistant"}});
        t.open(r.thinking ? "think" : "response");
    }
    return b.finish();
}

}   // namespace kimi::chat
