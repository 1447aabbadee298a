// Standard base64 (RFC 4648, '+' '/' alphabet, '=' padding), as used by tiktoken.model lines.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace kimi {

std::string base64_encode(std::string_view bytes);
// Strict about the alphabet and padding (length a multiple of 4, '=' only at the end);
// unused low bits are ignored, as Python's base64.b64decode does. nullopt on a violation.
std::optional<std::string> base64_decode(std::string_view text);

}   // namespace kimi
