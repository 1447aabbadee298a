// JSON Schema → GBNF text (see json_schema.h). One rule per $ref target (so recursion works),
// everything else inline expressions that parse_grammar turns into rules.
// ref: the schema converters of llama.cpp (json-schema-to-grammar) and xgrammar, by behaviour.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "grammar/json_number_range.h"
#include "grammar/regex.h"

namespace kimi::grammar {

namespace {

using json = nlohmann::ordered_json;

// JSON text pieces shared by every schema (rule names are fixed; the compiler adds the ones it uses).
const std::map<std::string, std::string>& base_rules() {
    static const std::map<std::string, std::string> r = {
        {"sp", "\" \"?"},
        {"hex", "[0-9a-fA-F]"},
        // one code point of a JSON string body: plain, or an escape (a \u escape is never half of a
        // surrogate pair, so each character counts once toward minLength / maxLength)
        {"char",
         "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CeEfF] hex hex hex | [dD] [0-7] hex hex))"},
        {"string", "\"\\\"\" char* \"\\\"\""},
        {"integer", "\"-\"? (\"0\" | [1-9] [0-9]{0,15})"},
        {"number", "integer (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?"},
        {"boolean", "\"true\" | \"false\""},
        {"null", "\"null\""},
        {"value", "object | array | string | number | boolean | null"},
        {"object", "\"{\" (string \":\" sp value (\",\" sp string \":\" sp value)*)? \"}\""},
        {"array", "\"[\" (value (\",\" sp value)*)? \"]\""},
    };
    return r;
}

// what each base rule refers to (so that only the used ones are written out)
const std::map<std::string, std::vector<std::string>>& base_deps() {
    static const std::map<std::string, std::vector<std::string>> d = {
        {"char", {"hex"}},
        {"string", {"char"}},
        {"number", {"integer"}},
        {"value", {"object", "array", "string", "number", "boolean", "null"}},
        {"object", {"string", "sp", "value"}},
        {"array", {"value", "sp"}},
    };
    return d;
}

const std::set<std::string>& annotations() {
    static const std::set<std::string> a = {"title",  "description", "default",     "examples", "$schema",
                                            "$id",    "$comment",    "deprecated",  "readOnly", "writeOnly",
                                            "strict", "$defs",       "definitions", "$anchor"};
    return a;
}

const std::set<std::string>& supported() {
    static const std::set<std::string> s = {"type",
                                            "properties",
                                            "required",
                                            "additionalProperties",
                                            "enum",
                                            "const",
                                            "items",
                                            "prefixItems",
                                            "additionalItems",
                                            "minItems",
                                            "maxItems",
                                            "anyOf",
                                            "oneOf",
                                            "allOf",
                                            "$ref",
                                            "nullable",
                                            "minLength",
                                            "maxLength",
                                            "pattern",
                                            "format",
                                            "minimum",
                                            "maximum",
                                            "exclusiveMinimum",
                                            "exclusiveMaximum"};
    return s;
}

std::string lit(const std::string& bytes) { return gbnf_literal(bytes); }

std::string compact(const json& v) {
    try {
        return v.dump();
    } catch (const json::exception&) {
        throw Error("json_schema: a value that is not valid UTF-8");
    }
}

std::string alt(const std::vector<std::string>& exprs) {
    if (exprs.size() == 1) return exprs[0];
    std::string out = "(";
    for (size_t i = 0; i < exprs.size(); ++i) out += (i ? " | " : "") + exprs[i];
    return out + ")";
}

// Formats (string bodies, no escapes needed: ASCII without quote or backslash).
const std::map<std::string, std::string>& formats() {
    static const std::map<std::string, std::string> f = {
        {"date",
         "[0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
         "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | "
         "\"2\" [0-8]))"},
        {"time",
         "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
         "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
        {"duration", "\"P\" ([0-9]{1,4} \"D\" | \"T\" [0-9]{1,4} [HMS] | [0-9]{1,4} \"W\")"},
        {"uuid", "hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}"},
        {"email",
         "[a-zA-Z0-9] ([a-zA-Z0-9._+-]{0,30} [a-zA-Z0-9])? \"@\" "
         "([a-zA-Z0-9] ([a-zA-Z0-9-]{0,20} [a-zA-Z0-9])? \".\"){1,3} [a-zA-Z]{2,8}"},
        {"hostname",
         "([a-zA-Z0-9] ([a-zA-Z0-9-]{0,20} [a-zA-Z0-9])? \".\"){0,3} [a-zA-Z] ([a-zA-Z0-9-]{0,20} [a-zA-Z0-9])?"},
        {"ipv4",
         "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9]) (\".\" (\"25\" [0-5] | \"2\" [0-4] "
         "[0-9] | "
         "\"1\" [0-9] [0-9] | [1-9]? [0-9])){3}"},
        {"ipv6", "hex{1,4} (\":\" hex{1,4}){7}"},
    };
    static const std::map<std::string, std::string> all = [] {
        std::map<std::string, std::string> m = f;
        m["date-time"] = "(" + f.at("date") + ") \"T\" (" + f.at("time") + ")";
        return m;
    }();
    return all;
}

bool types_meet(const std::string& a, const std::string& b) {
    return a == b || (a == "number" && b == "integer") || (a == "integer" && b == "number");
}

// v is of JSON Schema type t (a name or a list of names)
bool has_type(const json& v, const json& t) {
    if (t.is_array()) return std::any_of(t.begin(), t.end(), [&](const json& one) { return has_type(v, one); });
    if (!t.is_string()) return true;   // a malformed type is reported where it is compiled
    const std::string n = t.get<std::string>();
    if (n == "integer")
        return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (n == "number") return v.is_number();
    if (n == "string") return v.is_string();
    if (n == "boolean") return v.is_boolean();
    if (n == "null") return v.is_null();
    if (n == "object") return v.is_object();
    if (n == "array") return v.is_array();
    return true;
}

// What one compilation may produce: rules, and bytes of GBNF text. Every step of the
// compiler is linear in the schema, and these bound what a schema's references and merges may
// multiply it into.
constexpr size_t kMaxTextBytes = size_t(64) << 20;

class Compiler {
public:
    Compiler(const json& root, size_t max_rules, const CompilePoll& poll)
        : root_(root), max_rules_(max_rules), poll_(poll) {}

    std::string compile() {
        const std::string top = visit(root_, "", 0);
        std::string out = "root ::= " + top + "\n";
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        std::set<std::string> done;
        std::vector<std::string> todo(used_.begin(), used_.end());
        while (!todo.empty()) {
            const std::string n = todo.back();
            todo.pop_back();
            if (!done.insert(n).second) continue;
            out += n + " ::= " + base_rules().at(n) + "\n";
            if (auto it = base_deps().find(n); it != base_deps().end())
                todo.insert(todo.end(), it->second.begin(), it->second.end());
        }
        return out;
    }

private:
    [[noreturn]] static void fail(const std::string& what, const std::string& path) {
        throw Error("json_schema: " + what + " at " + (path.empty() ? "/" : path));
    }
    std::string base(const std::string& name) {
        used_.insert(name);
        return name;
    }
    // expr as a rule of its own (so text that is referred to more than once is written once)
    std::string named(const std::string& expr) {
        if (expr.find_first_of(" (|\"[") == std::string::npos) return expr;
        const std::string name = "s" + std::to_string(rules_.size());
        grow(expr.size());
        rules_.push_back({name, expr});
        return name;
    }
    // Counts what the compilation has written and polls now and then: a schema whose grammar
    // would be too large fails as soon as it is, not after the work.
    void grow(size_t text_bytes) {
        text_bytes_ += text_bytes;
        if (rules_.size() >= max_rules_ || text_bytes_ > kMaxTextBytes)
            throw Error("json_schema: the schema is too large to compile (its grammar passes " +
                        std::to_string(max_rules_) + " rules or " + std::to_string(kMaxTextBytes >> 20) + " MiB)");
    }
    void tick() {
        if (poll_ && (++steps_ & 255) == 0) poll_();
    }

    std::string visit(const json& s, const std::string& path, int depth) {
        if (depth > 64) fail("the schema is nested too deeply (over 64 levels)", path);
        tick();
        if (s.is_boolean()) {
            if (!s.get<bool>()) fail("the schema 'false' matches nothing", path);
            return base("value");
        }
        if (!s.is_object()) fail("a schema must be an object or a boolean", path);
        for (const auto& [k, v] : s.items())
            if (!supported().count(k) && !annotations().count(k)) fail("unsupported keyword '" + k + "'", path);

        if (s.contains("$ref")) {
            for (const auto& [k, v] : s.items())
                if (k != "$ref" && !annotations().count(k)) return visit(merge_all({s}, path), path, depth + 1);
            return ref_rule(s["$ref"], path + "/$ref", depth);
        }
        if (s.contains("allOf")) return visit(merge_all({s}, path), path, depth + 1);
        if (s.contains("nullable")) {
            if (!s["nullable"].is_boolean()) fail("'nullable' must be a boolean", path);
            json rest = s;
            rest.erase("nullable");
            const std::string v = visit(rest, path, depth + 1);
            return s["nullable"].get<bool>() ? alt({v, base("null")}) : v;
        }
        for (const char* kw : {"anyOf", "oneOf"})
            if (s.contains(kw)) return branches(s, kw, path, depth);
        if (s.contains("const")) return lit(compact(s["const"]));
        if (s.contains("enum")) {
            const json& e = s["enum"];
            if (!e.is_array() || e.empty()) fail("'enum' must be a non-empty array", path);
            std::vector<std::string> alts;   // the values of the schema's type, if it has one
            for (const json& v : e) {
                tick();
                if (s.contains("type") && !has_type(v, s["type"])) continue;
                alts.push_back(lit(compact(v)));
                grow(alts.back().size());
            }
            if (alts.empty()) fail("no value of 'enum' has the schema's 'type'", path);
            return alt(alts);
        }
        if (s.contains("type")) {
            const json& t = s["type"];
            if (t.is_array()) {
                if (t.empty()) fail("'type' must not be an empty list", path);
                std::set<std::string> seen;   // JSON Schema: the names are unique (so at most 7)
                for (const json& one : t)
                    if (!one.is_string() || !seen.insert(one.get<std::string>()).second)
                        fail("'type' must be a list of distinct type names", path);
                std::vector<std::string> alts;
                for (const json& one : t) {
                    json sub = s;
                    sub["type"] = one;
                    alts.push_back(visit(sub, path, depth + 1));
                }
                return alt(alts);
            }
            if (!t.is_string()) fail("'type' must be a string or a list of strings", path);
            return typed(t.get<std::string>(), s, path, depth);
        }
        // no type: what the keywords imply, or any value
        if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
            return typed("object", s, path, depth);
        if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
            return typed("array", s, path, depth);
        if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format"))
            return typed("string", s, path, depth);
        if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
            s.contains("exclusiveMaximum"))
            return typed("number", s, path, depth);
        return base("value");
    }

    // anyOf / oneOf (as anyOf): each branch merged with the rest of the schema.
    std::string branches(const json& s, const char* kw, const std::string& path, int depth) {
        const json& all = s[kw];
        if (!all.is_array() || all.empty()) fail("'" + std::string(kw) + "' must be a non-empty array", path);
        json rest = s;
        rest.erase(kw);
        std::vector<std::string> alts;
        for (size_t i = 0; i < all.size(); ++i) {
            const std::string p = path + "/" + kw + "/" + std::to_string(i);
            const json& b = all[i];
            // a branch whose type the surrounding schema excludes can never match: left out
            if (rest.contains("type") && rest["type"].is_string() && b.is_object() && b.contains("type") &&
                b["type"].is_string() && !types_meet(rest["type"].get<std::string>(), b["type"].get<std::string>()))
                continue;
            alts.push_back(visit(rest.size() > 0 ? merge_all({rest, b}, p) : b, p, depth + 1));
        }
        if (alts.empty()) fail("no branch of '" + std::string(kw) + "' fits the schema's 'type'", path);
        return alt(alts);
    }

    std::string typed(const std::string& t, const json& s, const std::string& path, int depth) {
        if (t == "string") return string_schema(s, path);
        if (t == "integer" || t == "number") return number_schema(s, path, t == "integer");
        if (t == "boolean") return base("boolean");
        if (t == "null") return base("null");
        if (t == "object") return object_schema(s, path, depth);
        if (t == "array") return array_schema(s, path, depth);
        fail("unknown 'type' \"" + t + "\"", path);
    }

    static int64_t count(const json& s, const char* kw, int64_t dflt, const std::string& path) {
        if (!s.contains(kw)) return dflt;
        const json& v = s[kw];
        if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
            fail("'" + std::string(kw) + "' must be a non-negative integer", path);
        const double d = v.get<double>();
        if (d < 0) fail("'" + std::string(kw) + "' must be a non-negative integer", path);
        if (d > 100000) fail("'" + std::string(kw) + "' is larger than 100000", path);
        return int64_t(d);
    }

    std::string string_schema(const json& s, const std::string& path) {
        const int64_t lo = count(s, "minLength", 0, path), hi = count(s, "maxLength", -1, path);
        if (hi >= 0 && hi < lo) fail("'minLength' is larger than 'maxLength'", path);
        const std::string q = "\"\\\"\"";
        if (s.contains("pattern")) {
            if (!s["pattern"].is_string()) fail("'pattern' must be a string", path);
            if (s.contains("minLength") || s.contains("maxLength") || s.contains("format"))
                fail("'pattern' together with 'minLength', 'maxLength' or 'format' is not supported", path);
            try {
                return "(" + q + " (" + regex_to_gbnf(s["pattern"].get<std::string>(), RegexMode::kJsonString) + ") " +
                    q + ")";
            } catch (const Error& e) {
                fail("'pattern': " + std::string(e.what()), path);
            }
        }
        if (s.contains("format")) {
            if (!s["format"].is_string()) fail("'format' must be a string", path);
            const std::string f = s["format"].get<std::string>();
            const auto it = formats().find(f);
            if (it == formats().end()) fail("unsupported 'format' \"" + f + "\"", path);
            if (s.contains("minLength") || s.contains("maxLength"))
                fail("'format' together with 'minLength' or 'maxLength' is not supported", path);
            if (f == "uuid" || f == "ipv6") base("hex");
            return "(" + q + " " + it->second + " " + q + ")";
        }
        if (lo == 0 && hi < 0) return base("string");
        base("char");
        const std::string rep =
            hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
        return "(" + q + " char" + rep + " " + q + ")";
    }

    std::string number_schema(const json& s, const std::string& path, bool integer) {
        NumberBounds b;
        for (const char* kw : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
            if (!s.contains(kw)) continue;
            const json& v = s[kw];
            if (v.is_boolean()) {   // draft 4: a flag on minimum / maximum
                if (std::string(kw) == "exclusiveMinimum")
                    b.lo_exclusive = v.get<bool>();
                else if (std::string(kw) == "exclusiveMaximum")
                    b.hi_exclusive = v.get<bool>();
                else
                    fail("'" + std::string(kw) + "' must be a number", path);
                continue;
            }
            if (!v.is_number()) fail("'" + std::string(kw) + "' must be a number", path);
            const double d = v.get<double>();
            const std::string k = kw;
            if (k == "minimum" || k == "exclusiveMinimum") {
                if (!b.lo || d > *b.lo || (d == *b.lo && k == "exclusiveMinimum")) {
                    b.lo = d;
                    b.lo_exclusive = k == "exclusiveMinimum";
                }
            } else if (!b.hi || d < *b.hi || (d == *b.hi && k == "exclusiveMaximum")) {
                b.hi = d;
                b.hi_exclusive = k == "exclusiveMaximum";
            }
        }
        if (!b.lo && !b.hi) return base(integer ? "integer" : "number");
        try {
            return number_range_gbnf(b, integer);
        } catch (const Error& e) {
            fail(e.what(), path);
        }
    }

    std::string property_pair(const std::string& key, const json& schema, const std::string& path, int depth) {
        return lit(compact(json(key))) + " \":\" " + base("sp") + " " + visit(schema, path, depth + 1);
    }

    std::string object_schema(const json& s, const std::string& path, int depth) {
        static const json no_props = json::object();
        const json& props = s.contains("properties") ? s["properties"] : no_props;
        if (!props.is_object()) fail("'properties' must be an object", path);
        if (props.size() > max_rules_ / 4)   // each property takes four rules of the object's grammar
            throw Error("json_schema: the schema is too large to compile ('properties' lists " +
                        std::to_string(props.size()) + " names at " + (path.empty() ? "/" : path) + "; at most " +
                        std::to_string(max_rules_ / 4) + ")");
        // hash lookups: an ordered_json object finds a key by a linear scan
        std::unordered_set<std::string_view> names;
        for (const auto& [k, v] : props.items()) names.insert(k);
        std::unordered_set<std::string_view> required;
        if (s.contains("required")) {
            if (!s["required"].is_array()) fail("'required' must be an array of property names", path);
            for (const json& r : s["required"]) {
                if (!r.is_string()) fail("'required' must be an array of property names", path);
                const std::string& name = r.get_ref<const std::string&>();
                if (!names.count(name))
                    fail("'required' names \"" + name.substr(0, 100) + "\", which is not in 'properties'", path);
                if (!required.insert(name).second) fail("'required' names \"" + name.substr(0, 100) + "\" twice", path);
            }
        }
        // extra properties: a schema for their values (not given: only when nothing is listed)
        std::optional<json> extra;
        if (s.contains("additionalProperties")) {
            const json& ap = s["additionalProperties"];
            if (!ap.is_boolean() && !ap.is_object()) fail("'additionalProperties' must be a boolean or a schema", path);
            if (!(ap.is_boolean() && !ap.get<bool>())) extra = ap;
        } else if (props.empty()) {
            extra = json(true);
        }
        std::vector<std::string> kv;   // one "key": value per property, in schema order
        std::vector<bool> req;
        size_t longest = 0;
        for (const auto& [k, v] : props.items()) {
            kv.push_back(named(property_pair(k, v, path + "/properties/" + k, depth)));
            req.push_back(required.count(k) > 0);
            longest = std::max(longest, k.size());
        }
        std::string extra_kv;
        if (extra) {
            // names that cannot be a listed one: longer (in characters) than the longest
            const std::string key = props.empty() ? base("string")
                                                  : (base("char"),
                                                     "(\"\\\"\" char{" + std::to_string(longest + 1) + "," +
                                                         std::to_string(longest + 24) + "} \"\\\"\")");
            extra_kv =
                named(key + " \":\" " + base("sp") + " " + visit(*extra, path + "/additionalProperties", depth + 1));
        }
        // head(k): properties k.. with none written yet; tail(k): with one written (comma first)
        const std::string comma = "\",\" " + base("sp") + " ";
        std::string tail = extra ? named("(" + comma + extra_kv + ")*") : "";
        std::string head = extra ? named("(" + extra_kv + " " + tail + ")?") : "";
        for (size_t i = kv.size(); i-- > 0;) {
            const std::string with = named(kv[i] + (tail.empty() ? "" : " " + tail));
            const std::string new_head = req[i] ? with : "(" + with + (head.empty() ? ")?" : " | " + head + ")");
            tail = named(req[i] ? comma + with : "(" + comma + kv[i] + ")?" + (tail.empty() ? "" : " " + tail));
            head = named(new_head);
        }
        return "(\"{\" " + (head.empty() ? "" : head + " ") + "\"}\")";
    }

    std::string array_schema(const json& s, const std::string& path, int depth) {
        int64_t lo = count(s, "minItems", 0, path), hi = count(s, "maxItems", -1, path);
        if (hi >= 0 && hi < lo) fail("'minItems' is larger than 'maxItems'", path);
        std::vector<std::string> prefix;
        std::optional<std::string> item;   // schema of the items after the prefix (none: no more items)
        const json* tuple = nullptr;
        if (s.contains("prefixItems"))
            tuple = &s["prefixItems"];
        else if (s.contains("items") && s["items"].is_array())
            tuple = &s["items"];   // draft 4 tuples
        if (tuple) {
            if (!tuple->is_array()) fail("'prefixItems' must be an array of schemas", path);
            for (size_t i = 0; i < tuple->size(); ++i)
                prefix.push_back(visit((*tuple)[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
            const char* more = s.contains("prefixItems") ? "items" : "additionalItems";
            if (s.contains(more) && !(s[more].is_boolean() && !s[more].get<bool>()))
                item = visit(s[more], path + "/" + more, depth + 1);
        } else if (s.contains("items")) {
            if (!(s["items"].is_boolean() && !s["items"].get<bool>()))
                item = visit(s["items"], path + "/items", depth + 1);
        } else {
            item = base("value");
        }
        const int64_t np = int64_t(prefix.size());
        if (!item)
            hi = hi < 0 ? np : std::min(hi, np);
        else
            item = named(*item);
        for (std::string& p : prefix) p = named(p);
        if (lo > hi && hi >= 0) fail("'minItems' asks for more items than the schema allows", path);
        const std::string comma = "\",\" " + base("sp") + " ";
        // the items after the prefix: count in [max(0, lo − np), hi − np]
        std::string rest;
        const int64_t rlo = std::max<int64_t>(0, lo - np), rhi = hi < 0 ? -1 : std::max<int64_t>(0, hi - np);
        if (item && rhi != 0) {
            const std::string bound = "{" + std::to_string(rlo) + "," + (rhi < 0 ? "" : std::to_string(rhi)) + "}";
            rest = "(" + comma + *item + ")" + bound;
        }
        // the prefix from the end: position k is required when k < lo
        std::string after = rest;   // what follows position k when k items are written (k ≥ 1)
        for (int64_t k = np - 1; k >= 1; --k) {
            const std::string one = "(" + comma + prefix[size_t(k)] + (after.empty() ? "" : " " + after) + ")";
            after = named(k < lo ? one : one + "?");
        }
        std::string body;
        if (np > 0) {
            body = "(" + prefix[0] + (after.empty() ? "" : " " + after) + ")" + (lo > 0 ? "" : "?");
        } else if (item && rhi != 0) {
            // first item without a comma: lo ≥ 1 → item (, item){lo−1, hi−1}; else optional
            const int64_t l1 = std::max<int64_t>(0, rlo - 1), h1 = rhi < 0 ? -1 : rhi - 1;
            const std::string bound = "{" + std::to_string(l1) + "," + (h1 < 0 ? "" : std::to_string(h1)) + "}";
            body = "(" + *item + " (" + comma + *item + ")" + bound + ")" + (rlo > 0 ? "" : "?");
        }
        return "(\"[\" " + (body.empty() ? "" : body + " ") + "\"]\")";
    }

    std::string ref_rule(const json& ref, const std::string& path, int depth) {
        if (!ref.is_string()) fail("'$ref' must be a string", path);
        const std::string r = ref.get<std::string>();
        if (auto it = refs_.find(r); it != refs_.end()) return it->second;
        const json& target = resolve(r, path);
        const std::string name = "ref" + std::to_string(refs_.size());
        refs_[r] = name;
        const size_t slot = rules_.size();
        rules_.push_back({name, ""});
        const std::string body = visit(target, path, depth + 1);
        rules_[slot].second = body;
        return name;
    }

    const json& resolve(const std::string& r, const std::string& path) const {
        if (r.empty() || r[0] != '#') fail("'$ref' \"" + r + "\" is not a reference into this schema (#...)", path);
        try {
            return root_.at(json::json_pointer(r.substr(1)));
        } catch (const json::exception&) {
            fail("'$ref' \"" + r + "\" names nothing in this schema", path);
        }
    }

    // allOf (and $ref with siblings): one schema with the parts' keywords; properties are
    // merged (a property in several parts: allOf of its schemas), required lists joined,
    // types intersected; any other keyword given differently by two parts is an error.
    json merge_all(const std::vector<json>& parts, const std::string& path, int guard = 0) const {
        if (guard > 32) fail("'allOf' / '$ref' nested too deeply", path);
        json out = json::object();
        for (json part : parts) {
            if (part.is_boolean()) {
                if (!part.get<bool>()) fail("'allOf' with the schema 'false' matches nothing", path);
                continue;
            }
            if (!part.is_object()) fail("'allOf' parts must be schemas", path);
            if (part.contains("$ref")) {
                if (!part["$ref"].is_string()) fail("'$ref' must be a string", path);
                const json target = resolve(part["$ref"].get<std::string>(), path);
                part.erase("$ref");
                part = merge_all({target, part}, path, guard + 1);
            }
            if (part.contains("allOf")) {
                const json subs = part["allOf"];
                if (!subs.is_array() || subs.empty()) fail("'allOf' must be a non-empty array", path);
                part.erase("allOf");
                std::vector<json> all(subs.begin(), subs.end());
                all.push_back(part);
                part = merge_all(all, path, guard + 1);
            }
            for (const auto& [k, v] : part.items()) {
                if (annotations().count(k)) continue;
                if (!out.contains(k)) {
                    out[k] = v;
                } else if (k == "properties" && v.is_object() && out[k].is_object()) {
                    // by name through a hash map (ordered_json's own lookup scans); the object
                    // is a vector of pairs, appended to in place
                    auto& merged = out[k].get_ref<json::object_t&>();
                    std::unordered_map<std::string, size_t> at;
                    for (size_t i = 0; i < merged.size(); ++i) at.emplace((merged.begin() + i)->first, i);
                    for (const auto& [pk, pv] : v.items()) {
                        if (const auto [it, fresh] = at.emplace(pk, merged.size()); fresh) {
                            merged.emplace_back(pk, pv);
                        } else if (json& old = (merged.begin() + it->second)->second; old != pv) {
                            old = json{{"allOf", json::array({old, pv})}};
                        }
                    }
                } else if (k == "required" && v.is_array() && out[k].is_array()) {
                    std::unordered_set<std::string> have;
                    for (const json& r : out[k])
                        if (r.is_string()) have.insert(r.get<std::string>());
                    for (const json& r : v)
                        if (!r.is_string() || have.insert(r.get<std::string>()).second) out[k].push_back(r);
                } else if (k == "type" && v.is_string() && out[k].is_string() && v != out[k]) {
                    const std::string a = out[k].get<std::string>(), b = v.get<std::string>();
                    if ((a == "number" && b == "integer") || (a == "integer" && b == "number"))
                        out[k] = "integer";
                    else
                        fail("'allOf' parts with different 'type's (" + a + ", " + b + ")", path);
                } else if (out[k] != v) {
                    fail("'allOf' parts that give '" + k + "' differently", path);
                }
            }
        }
        return out;
    }

    const json& root_;
    size_t max_rules_;
    const CompilePoll& poll_;
    uint64_t steps_ = 0;                                       // schemas visited (the poll's clock)
    size_t text_bytes_ = 0;                                    // GBNF written so far
    std::vector<std::pair<std::string, std::string>> rules_;   // $ref targets
    std::map<std::string, std::string> refs_;                  // $ref → its rule
    std::set<std::string> used_;                               // base rules used
};

}   // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, size_t max_rules, const CompilePoll& poll) {
    return Compiler(schema, max_rules, poll).compile();
}

std::string json_object_gbnf() { return json_schema_to_gbnf(nlohmann::ordered_json::object({{"type", "object"}})); }

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, size_t max_rules, const CompilePoll& poll) {
    const std::string text = json_schema_to_gbnf(schema, max_rules, poll);
    try {
        return parse_grammar(text, max_rules, poll);
    } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("left-recursive") != std::string::npos)
            throw Error("json_schema: a '$ref' that refers to itself before any value is written");
        throw Error("json_schema: the schema is too large to compile (" + what + ")");
    }
}

}   // namespace kimi::grammar
