// Reading request bodies: the small helpers the parsers of every API share (OpenAI chat and
// completions, Responses, Anthropic Messages). Errors are ApiError 400 naming the field.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace kimi::server::body {

// The value of `key`, or nullptr when absent or null (OpenAI treats null as "not given").
inline const nlohmann::ordered_json* field(const nlohmann::ordered_json& b, const char* key) {
    auto it = b.find(key);
    return it == b.end() || it->is_null() ? nullptr : &*it;
}

// "where[i]": the path of an array element, for messages.
inline std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

// The request field a path such as "messages[2].content[0]" lies in: the error's param.
inline std::string top(const std::string& where) { return where.substr(0, where.find_first_of("[.")); }

// o[key] as a string, nullptr when absent or null; a 400 naming where.key for another type.
inline const std::string* opt_str(const nlohmann::ordered_json& o, const char* key, const std::string& where) {
    const nlohmann::ordered_json* v = field(o, key);
    if (!v) return nullptr;
    if (!v->is_string()) throw bad_param(top(where), where + "." + key + " must be a string");
    return &v->get_ref<const std::string&>();
}

// o[key] as a string; a 400 naming where.key otherwise.
inline const std::string& str(const nlohmann::ordered_json& o, const char* key, const std::string& where) {
    if (const std::string* s = opt_str(o, key, where)) return *s;
    throw bad_param(top(where), where + "." + key + " must be a string");
}

// o[key] when it is an object, nullptr when absent or null; a 400 naming where.key otherwise.
inline const nlohmann::ordered_json* opt_obj(const nlohmann::ordered_json& o, const char* key,
                                             const std::string& where) {
    const nlohmann::ordered_json* v = field(o, key);
    if (v && !v->is_object()) throw bad_param(top(where), where + "." + key + " must be an object");
    return v;
}

}   // namespace kimi::server::body
