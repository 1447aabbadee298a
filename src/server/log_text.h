// Text from a client made safe for one log line: control bytes (C0, DEL, and the C1 controls
// U+0080–U+009F, which some terminals read as escape sequences), bytes that are not UTF-8 and
// the backslash are written as \n, \r, \t, \\ or \xHH, so a request can neither start a line of
// its own (a forged "access:" line) nor move the cursor or change colours (ANSI escapes).
// Cut at max_bytes of the input, with "…" when cut.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace kimi::server {

inline std::string log_text(std::string_view s, size_t max_bytes = 500) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    const size_t n = std::min(s.size(), max_bytes);
    out.reserve(n + 8);
    auto escape = [&out](uint8_t c) {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
    };
    for (size_t i = 0; i < n;) {
        const auto c = uint8_t(s[i]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            escape(c);
        } else if (c >= 0x80) {   // one UTF-8 sequence, kept only when well formed and not a C1 control
            const size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
            bool ok = len > 0 && i + len <= n && c <= 0xF4;
            for (size_t k = 1; ok && k < len; ++k) ok = (uint8_t(s[i + k]) & 0xC0) == 0x80;
            if (ok && len == 2 && c == 0xC2 && uint8_t(s[i + 1]) < 0xA0) ok = false;   // U+0080–U+009F
            if (ok && len == 3) {   // no overlong forms, no surrogates
                const auto c1 = uint8_t(s[i + 1]);
                ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
            }
            if (ok && len == 4) {
                const auto c1 = uint8_t(s[i + 1]);
                ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
            }
            if (!ok) {
                escape(c);
                ++i;
                continue;
            }
            out.append(s.substr(i, len));
            i += len;
            continue;
        } else {
            out += char(c);
        }
        ++i;
    }
    if (s.size() > max_bytes) out += "…";
    return out;
}

}   // namespace kimi::server
