// Standard base64 (RFC 4648, '+' '/' alphabet, '=' padding), as used by tiktoken.model lines,
// and a lenient decoder for what HTTP clients send (data: URLs).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace kimi {

std::string base64_encode(std::string_view bytes);
// Strict about the alphabet and padding (length a multiple of 4, '=' only at the end);
// unused low bits are ignored, as Python's base64.b64decode does. nullopt on a violation.
std::optional<std::string> base64_decode(std::string_view text);
// Lenient: ASCII whitespace anywhere is skipped (`base64`'s 76-column lines, "\n" or "\r\n"),
// the URL-safe '-' '_' are read as '+' '/', and the '=' padding may be left out (if present it
// must be complete and last). Still nullopt on any other character, data after '=', or a length
// no encoder makes (4k+1 symbols).
std::optional<std::string> base64_decode_lenient(std::string_view text);

}   // namespace kimi
