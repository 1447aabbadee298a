// ConfigReader: typed, range-checked reads of one config.json object whose errors name the
// file and the full key ("text_config.hidden_size"); shared by the text and vision parsers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kimi {

struct ConfigReader {
    using json = nlohmann::json;
    const json& j;
    std::string source, prefix;

    [[noreturn]] void fail(const std::string& key, const std::string& why) const {
        throw Error(source + ": config key '" + prefix + key + "' " + why);
    }
    const json& need(const std::string& key) const {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) fail(key, "is missing");
        return *it;
    }
    int64_t integer(const std::string& key, int64_t lo, int64_t hi) const {
        const json& v = need(key);
        if (!v.is_number_integer()) fail(key, "must be an integer");
        const int64_t x = v.get<int64_t>();
        if (x < lo || x > hi)
            fail(
                key,
                "= " + std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return x;
    }
    int64_t integer_or(const std::string& key, int64_t def, int64_t lo, int64_t hi) const {
        auto it = j.find(key);
        return (it == j.end() || it->is_null()) ? def : integer(key, lo, hi);
    }
    double number(const std::string& key, double lo, double hi) const {
        const json& v = need(key);
        if (!v.is_number()) fail(key, "must be a number");
        const double x = v.get<double>();
        if (!(x >= lo && x <= hi)) fail(key, "= " + std::to_string(x) + " is out of range");
        return x;
    }
    double number_or(const std::string& key, double def, double lo, double hi) const {
        auto it = j.find(key);
        return (it == j.end() || it->is_null()) ? def : number(key, lo, hi);
    }
    bool boolean_or(const std::string& key, bool def) const {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return def;
        if (!it->is_boolean()) fail(key, "must be true or false");
        return it->get<bool>();
    }
    std::string string_or(const std::string& key, const std::string& def) const {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return def;
        if (!it->is_string()) fail(key, "must be a string");
        return it->get<std::string>();
    }
    std::vector<int64_t> int_list(const std::string& key) const {
        const json& v = need(key);
        if (!v.is_array()) fail(key, "must be a list of integers");
        std::vector<int64_t> out;
        for (const auto& e : v) {
            if (!e.is_number_integer()) fail(key, "must be a list of integers");
            out.push_back(e.get<int64_t>());
        }
        return out;
    }
};

}   // namespace kimi
