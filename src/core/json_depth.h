// The nesting depth of JSON text, by one linear scan (brackets outside strings), without
// parsing it: checked before any JSON that comes from a request is parsed, since copying,
// printing or walking a value nested 100k deep recursively would exhaust the stack.
// kMaxJsonDepth is the limit for request bodies and for JSON given inside their strings
// (schemas as text, tool-call arguments); docs/server.md lists it with the other limits.
#pragma once
#include <string_view>

namespace kimi {

constexpr int kMaxJsonDepth = 64;

// Whether `text` nests arrays/objects at most `max_depth` deep (malformed text is judged by its
// brackets only; the parser reports the rest).
inline bool json_depth_within(std::string_view text, int max_depth = kMaxJsonDepth) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return false;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return true;
}

}   // namespace kimi
