// Unicode support for the tokenizer: per-code-point class bits (generated tables, see
// gen_unicode_tables.mjs / unicode_data.inc) and strict UTF-8 helpers.
//
// The class bits are what tiktoken's regex engine (Rust regex-syntax, via fancy-regex) means by
// \p{L}, \p{N}, [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], [\p{Ll}\p{Lm}\p{Lo}\p{M}], \p{Han} (Script) and
// \s (White_Space), for the Unicode version in kUnicodeVersion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kimi::tok {

enum CpClass : uint8_t {
    kLetter = 1,     // \p{L}
    kNumber = 2,     // \p{N}
    kUpperSet = 4,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    kLowerSet = 8,   // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    kHan = 16,       // \p{Han} (Script=Han)
    kSpace = 32,     // \s (White_Space)
    kCrLf = 64,      // U+000A or U+000D
};

extern const char* const kUnicodeVersion;

// Sentinel code point for a byte that does not start a valid UTF-8 sequence. Its class is 0
// (not a letter, number, mark or space), like a punctuation character.
constexpr uint32_t kInvalidCp = 0x110000;

// Class bits of a code point (kInvalidCp and anything above U+10FFFF: 0).
uint8_t cp_class_slow(uint32_t cp);
extern const uint8_t kAsciiClass[128];

inline uint8_t cp_class(uint32_t cp) { return cp < 128 ? kAsciiClass[cp] : cp_class_slow(cp); }

// Decodes one code point at p (p < end). Strict UTF-8 (no overlongs, no surrogates, at most
// U+10FFFF). Returns the sequence length; on an invalid or truncated sequence returns 1 and
// sets cp = kInvalidCp.
inline int utf8_decode(const unsigned char* p, const unsigned char* end, uint32_t& cp) {
    const unsigned c = p[0];
    if (c < 0x80) {
        cp = c;
        return 1;
    }
    const ptrdiff_t left = end - p;
    if (c >= 0xC2 && c <= 0xDF) {
        if (left >= 2 && (p[1] & 0xC0) == 0x80) {
            cp = ((c & 0x1Fu) << 6) | (p[1] & 0x3Fu);
            return 2;
        }
    } else if (c >= 0xE0 && c <= 0xEF) {
        if (left >= 3 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80) {
            const uint32_t v = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
            if (v >= 0x800 && (v < 0xD800 || v > 0xDFFF)) {
                cp = v;
                return 3;
            }
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        if (left >= 4 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) {
            const uint32_t v = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
            if (v >= 0x10000 && v <= 0x10FFFF) {
                cp = v;
                return 4;
            }
        }
    }
    cp = kInvalidCp;
    return 1;
}

// Python str.isspace() (used by Kimi's wrapper to cut long runs): White_Space plus U+001C..U+001F.
inline bool py_isspace(uint32_t cp) {
    if (cp < 128) return (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool utf8_valid(std::string_view s);

// Length of the longest prefix of s[pos..] that is a *prefix* of some valid UTF-8 sequence but
// is not complete (0 if s[pos] starts a complete sequence or is definitely invalid).
size_t utf8_incomplete_len(std::string_view s, size_t pos);

// Appends s to out, replacing each maximal ill-formed subsequence by U+FFFD (the WHATWG /
// Python bytes.decode("utf-8", "replace") rule).
void utf8_append_lossy(std::string& out, std::string_view s);

void utf8_append(std::string& out, uint32_t cp);

}   // namespace kimi::tok
