// Structured output fields → grammar (see structured_request.h).
#include "server/structured_request.h"

#include <algorithm>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/json_linear.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/api_error.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;
using grammar::Alternative;
using grammar::CompilePoll;
using grammar::Grammar;

constexpr size_t kMaxRules = 100000;   // what one request's grammar may expand to
constexpr size_t kMaxCalls = 8;        // parallel tool calls a forced reply may hold

const J* field(const J& b, const char* key) {
    auto it = b.find(key);
    return it == b.end() || it->is_null() ? nullptr : &*it;
}

// A schema given as an object or as JSON text (vLLM accepts both).
J schema_value(const J& v, const std::string& param) {
    if (v.is_string()) {
        if (!json_depth_within(v.get_ref<const std::string&>()))
            throw bad_param(
                param, param + ": the schema text is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        try {
            return parse_json_linear(v.get_ref<const std::string&>());
        } catch (const nlohmann::json::exception&) {
            throw bad_param(param, param + " must be a JSON Schema (an object, or its JSON text)");
        }
    }
    if (!v.is_object() && !v.is_boolean()) throw bad_param(param, param + " must be a JSON Schema object");
    return v;
}

// Compiles, turning our errors into 400s naming the field.
template <class F>
Grammar compile(const std::string& param, F&& f) {
    try {
        return f();
    } catch (const Error& e) {
        throw bad_param(param, param + ": " + e.what());
    }
}

// max_rules: what is left of the request's rules (forced tools share kMaxRules).
Grammar schema_grammar(const J& schema, const std::string& param, const CompilePoll& poll,
                       size_t max_rules = kMaxRules) {
    return compile(param, [&] { return grammar::json_schema_grammar(schema, max_rules, poll); });
}

Grammar kind_grammar(const std::string& kind, const J& v, const std::string& param, const CompilePoll& poll) {
    if (kind == "json") return schema_grammar(schema_value(v, param), param, poll);
    if (kind == "json_object") {
        if (!v.is_boolean() || !v.get<bool>()) throw bad_param(param, param + " must be true");
        return compile(param, [] { return grammar::parse_grammar(grammar::json_object_gbnf(), kMaxRules); });
    }
    if (kind == "regex") {
        if (!v.is_string()) throw bad_param(param, param + " (regex) must be a string");
        return compile(param, [&] { return grammar::regex_grammar(v.get<std::string>()); });
    }
    if (kind == "choice") {
        if (!v.is_array() || v.empty())
            throw bad_param(param, param + " (choice) must be a non-empty array of strings");
        std::vector<std::string> choices;
        for (const J& c : v) {
            if (!c.is_string() || c.get<std::string>().empty())
                throw bad_param(param, param + " (choice) must be a non-empty array of non-empty strings");
            choices.push_back(c.get<std::string>());
        }
        return compile(param, [&] { return grammar::choice_grammar(choices); });
    }
    if (kind == "grammar") {
        if (!v.is_string()) throw bad_param(param, param + " (grammar) must be GBNF text");
        return compile(param,
                       [&] { return grammar::parse_grammar(v.get<std::string>(), kMaxRules, poll); });   // "grammar: …"
    }
    throw bad_param(param, "unknown structured output kind '" + kind + "' (json, regex, choice, grammar, json_object)");
}

// The frames' pieces: literal text, special tokens, and K3's <|open|>TAG<|sep|> / <|close|>TAG<|sep|>.
void text(Grammar& g, Alternative& a, const std::string& s) { g.append_literal(a, s); }
void special(Grammar& g, Alternative& a, const std::string& name) {
    g.append_literal(a, grammar::special_token_bytes(name));
}
void k3_tag(Grammar& g, Alternative& a, const char* marker, const std::string& tag) {
    special(g, a, marker);
    text(g, a, tag);
    special(g, a, "<|sep|>");
}
void k3_open(Grammar& g, Alternative& a, const std::string& tag) { k3_tag(g, a, "<|open|>", tag); }
void k3_close(Grammar& g, Alternative& a, const std::string& tag) { k3_tag(g, a, "<|close|>", tag); }

// Free text: any characters (K3's think channel).
int32_t free_text(Grammar& g) {
    const int32_t any = g.add_char_class({}, true);
    return g.add_star({Grammar::ref(any)}, "free-text");
}

std::string xml_attr(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '&')
            out += "&amp;";
        else if (c == '"')
            out += "&quot;";
        else if (c == '<')
            out += "&lt;";
        else if (c == '>')
            out += "&gt;";
        else
            out += c;
    }
    return out;
}

// calls k = 0..kMaxCalls−1 in sequence: call_k (call_{k+1})?; each call one of the tools.
int32_t tool_calls(Grammar& g, ChatFrame frame, const ForcedTools& ft, const CompilePoll& poll) {
    std::vector<int32_t> args;   // each tool's arguments grammar (spliced once), all within kMaxRules
    for (const auto& [name, params] : ft.tools) {
        if (g.rules.size() >= kMaxRules)
            throw bad_param("tool_choice",
                            "tool_choice: the tools' parameters are too large to compile together (" +
                                std::to_string(kMaxRules) + " rules)");
        args.push_back(g.splice(schema_grammar(params, "tools[" + name.substr(0, 100) + "].function.parameters", poll,
                                               kMaxRules - g.rules.size())));
    }
    const size_t n_calls = ft.parallel ? kMaxCalls : 1;
    int32_t next = -1;
    for (size_t k = n_calls; k-- > 0;) {
        const int32_t call = g.add_rule("call" + std::to_string(k));
        for (size_t t = 0; t < ft.tools.size(); ++t) {
            Alternative a;
            const std::string& name = ft.tools[t].first;
            if (frame == ChatFrame::kK3) {
                k3_open(g, a, "call tool=\"" + xml_attr(name) + "\" index=\"" + std::to_string(k + 1) + "\"");
                k3_open(g, a, "json type=\"object\"");
                a.push_back(Grammar::ref(args[t]));
                k3_close(g, a, "json");
                k3_close(g, a, "call");
            } else {
                special(g, a, "<|tool_call_begin|>");
                text(g, a, "functions." + name + ":" + std::to_string(k));
                special(g, a, "<|tool_call_argument_begin|>");
                a.push_back(Grammar::ref(args[t]));
                special(g, a, "<|tool_call_end|>");
            }
            g.rules[size_t(call)].alts.push_back(std::move(a));
        }
        if (next >= 0) {   // call_k then, optionally, the next ones
            const int32_t more = g.add_rule("calls" + std::to_string(k));
            g.rules[size_t(more)].alts = {{Grammar::ref(call), Grammar::ref(next)}, {Grammar::ref(call)}};
            next = more;
        } else {
            next = call;
        }
    }
    return next;
}

}   // namespace

std::optional<Grammar> parse_output_constraint(const J& b, const CompilePoll& poll) {
    std::vector<std::pair<std::string, Grammar>> found;
    if (const J* rf = field(b, "response_format")) {
        if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
            throw bad_param("response_format", "response_format must be an object with a type");
        const std::string type = (*rf)["type"].get<std::string>();
        if (type == "json_object") {
            found.push_back({"response_format", kind_grammar("json_object", true, "response_format", poll)});
        } else if (type == "json_schema") {
            const J* js = field(*rf, "json_schema");
            if (!js || !js->is_object())
                throw bad_param("response_format", "response_format.json_schema must be an object");
            const J* schema = field(*js, "schema");
            if (!schema) throw bad_param("response_format", "response_format.json_schema.schema is required");
            found.push_back(
                {"response_format", schema_grammar(schema_value(*schema, "response_format"), "response_format", poll)});
        } else if (type != "text") {
            throw bad_param("response_format",
                            "response_format.type must be text, json_object or json_schema, got '" + type + "'");
        }
    }
    if (const J* so = field(b, "structured_outputs")) {
        if (!so->is_object()) throw bad_param("structured_outputs", "structured_outputs must be an object");
        for (const char* kind : {"json", "regex", "choice", "grammar", "json_object"})
            if (const J* v = field(*so, kind))
                found.push_back({"structured_outputs", kind_grammar(kind, *v, "structured_outputs", poll)});
        for (const auto& [k, v] : so->items()) {
            static const std::vector<std::string> known = {"json",
                                                           "regex",
                                                           "choice",
                                                           "grammar",
                                                           "json_object",
                                                           "disable_fallback",
                                                           "disable_any_whitespace",
                                                           "whitespace_pattern",
                                                           "disable_additional_properties",
                                                           "backend"};
            if (std::find(known.begin(), known.end(), k) == known.end())
                throw bad_param("structured_outputs", "structured_outputs." + k + " is not supported");
        }
    }
    for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"})
        if (const J* v = field(b, key)) found.push_back({key, kind_grammar(std::string(key).substr(7), *v, key, poll)});
    if (found.size() > 1)
        throw bad_param(found[1].first,
                        "give one output constraint, not several (" + found[0].first + " and " + found[1].first + ")");
    if (found.empty()) return std::nullopt;
    return std::move(found[0].second);
}

std::optional<ForcedTools> parse_forced_tools(const J& b, const J& tools) {
    const J* tc = field(b, "tool_choice");
    if (!tc || (tc->is_string() && (*tc == "auto" || *tc == "none"))) return std::nullopt;
    ForcedTools ft;
    if (const J* p = field(b, "parallel_tool_calls")) {
        if (!p->is_boolean()) throw bad_param("parallel_tool_calls", "parallel_tool_calls must be a boolean");
        ft.parallel = p->get<bool>();
    }
    if (!tools.is_array() || tools.empty())
        throw bad_param("tool_choice", "tool_choice forces a tool call, but no tools were given");
    std::optional<std::string> only;
    if (tc->is_object()) {
        const J* fn = field(*tc, "function");
        if (!tc->contains("type") || (*tc)["type"] != "function" || !fn || !fn->is_object() || !fn->contains("name") ||
            !(*fn)["name"].is_string())
            throw bad_param("tool_choice",
                            "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                            "\"function\": {\"name\": ...}}");
        only = (*fn)["name"].get<std::string>();
    } else if (!(tc->is_string() && *tc == "required")) {
        throw bad_param("tool_choice",
                        "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}");
    }
    for (const J& t : tools) {
        const std::string name = t["function"]["name"].get<std::string>();
        if (only && name != *only) continue;
        const J* params = field(t["function"], "parameters");
        ft.tools.push_back({name, params ? *params : J{{"type", "object"}}});
    }
    if (ft.tools.empty())
        throw bad_param("tool_choice", "tool_choice names the function '" + *only + "', which is not in tools");
    return ft;
}

Grammar frame_grammar(ChatFrame frame, bool thinking, std::optional<Grammar> body,
                      const std::optional<ForcedTools>& tools, const CompilePoll& poll) {
    if (frame == ChatFrame::kNone && !tools) return std::move(*body);
    Grammar g;
    g.root = g.add_rule("reply");
    Alternative a;
    if (frame == ChatFrame::kK3) {
        if (thinking) {   // the prompt opened the think channel: free text until it closes
            a.push_back(Grammar::ref(free_text(g)));
            k3_close(g, a, "think");
            k3_open(g, a, "response");
        }
        if (body) a.push_back(Grammar::ref(g.splice(*body)));
        k3_close(g, a, "response");
        if (tools) {
            k3_open(g, a, "tools");
            a.push_back(Grammar::ref(tool_calls(g, frame, *tools, poll)));
            k3_close(g, a, "tools");
        }
        k3_close(g, a, "message");
    } else if (tools) {   // Kimi Linear: the calls section only
        special(g, a, "<|tool_calls_section_begin|>");
        a.push_back(Grammar::ref(tool_calls(g, frame, *tools, poll)));
        special(g, a, "<|tool_calls_section_end|>");
    } else {
        a.push_back(Grammar::ref(g.splice(*body)));
    }
    g.rules[size_t(g.root)].alts.push_back(std::move(a));
    g.validate();
    return g;
}

}   // namespace kimi::server
