// Python-compatible JSON serialization (see py_json.h). Mirrors CPython Lib/json/encoder.py
// (py_encode_basestring, float.__repr__) with ensure_ascii=False.
#include "tokenizer/py_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kimi::tok {
namespace {

void dump_string(const std::string& s, std::string& out) {
    out += '"';
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    out += '"';
}

void dump(const nlohmann::ordered_json& v, std::string& out, bool compact, bool sort_keys) {
    using T = nlohmann::ordered_json::value_t;
    switch (v.type()) {
        case T::null: out += "null"; break;
        case T::boolean: out += v.get<bool>() ? "true" : "false"; break;
        case T::number_integer: out += std::to_string(v.get<int64_t>()); break;
        case T::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
        case T::number_float: out += py_float_repr(v.get<double>()); break;
        case T::string: dump_string(v.get_ref<const std::string&>(), out); break;
        case T::array: {
            out += '[';
            bool first = true;
            for (const auto& e : v) {
                if (!first) out += compact ? "," : ", ";
                first = false;
                dump(e, out, compact, sort_keys);
            }
            out += ']';
            break;
        }
        case T::object: {
            std::vector<std::pair<const std::string*, const nlohmann::ordered_json*>> items;
            for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(&it.key(), &it.value());
            if (sort_keys)
                std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
            out += '{';
            bool first = true;
            for (const auto& [k, val] : items) {
                if (!first) out += compact ? "," : ", ";
                first = false;
                dump_string(*k, out);
                out += compact ? ":" : ": ";
                dump(*val, out, compact, sort_keys);
            }
            out += '}';
            break;
        }
        default: out += "null"; break;   // binary / discarded: not produced by the parser
    }
}

}   // namespace

std::string py_float_repr(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    // Shortest round-trip digits, then Python's layout: fixed for -4 <= exp < 16, else d.ddde±XX.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string sign;
    if (sci[0] == '-') {
        sign = "-";
        sci.erase(0, 1);
    }
    const size_t epos = sci.find('e');
    std::string digits = sci.substr(0, epos);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int exp = std::atoi(sci.c_str() + epos + 1);
    std::string out = sign;
    if (exp < -4 || exp >= 16) {
        out += digits[0];
        if (digits.size() > 1) out += "." + digits.substr(1);
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        out += eb;
    } else if (exp >= 0) {
        const size_t int_len = size_t(exp) + 1;
        if (digits.size() <= int_len) {
            out += digits + std::string(int_len - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, int_len) + "." + digits.substr(int_len);
        }
    } else {
        out += "0." + std::string(size_t(-exp - 1), '0') + digits;
    }
    return out;
}

std::string py_json_dumps(const nlohmann::ordered_json& v, bool compact, bool sort_keys) {
    std::string out;
    dump(v, out, compact, sort_keys);
    return out;
}

}   // namespace kimi::tok
