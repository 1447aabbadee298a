// base64 encode, strict and lenient decode (see base64.h).
#include "core/base64.h"

#include <cstdint>

namespace kimi {
namespace {

const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}   // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t v =
            (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    const size_t rest = bytes.size() - i;
    if (rest == 1) {
        const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += "==";
    } else if (rest == 2) {
        const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8);
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        const bool last = i + 4 == text.size();
        int pad = 0;
        if (last && text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
        int v[4];
        for (int k = 0; k < 4 - pad; ++k) {
            v[k] = value(text[i + size_t(k)]);
            if (v[k] < 0) return std::nullopt;
        }
        for (int k = 4 - pad; k < 4; ++k) v[k] = 0;
        const uint32_t w = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
        out += char(w >> 16);
        if (pad < 2) out += char((w >> 8) & 0xFF);
        if (pad < 1) out += char(w & 0xFF);
    }
    return out;
}

std::optional<std::string> base64_decode_lenient(std::string_view text) {
    std::string out;
    out.reserve(text.size() / 4 * 3 + 3);
    uint32_t acc = 0;   // the symbols of the current quantum
    int have = 0;       // how many (0..3)
    size_t n_data = 0, n_pad = 0;
    for (const char c : text) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') continue;
        if (c == '=') {
            ++n_pad;
            continue;
        }
        if (n_pad > 0) return std::nullopt;   // data after padding
        const int v = c == '-' ? 62 : c == '_' ? 63 : value(c);
        if (v < 0) return std::nullopt;
        ++n_data;
        acc = (acc << 6) | uint32_t(v);
        if (++have == 4) {
            out += char(acc >> 16);
            out += char((acc >> 8) & 0xFF);
            out += char(acc & 0xFF);
            acc = 0;
            have = 0;
        }
    }
    if (have == 1) return std::nullopt;                                               // 6 bits cannot end a byte
    if (n_pad > 0 && (n_pad > 2 || (n_data + n_pad) % 4 != 0)) return std::nullopt;   // partial padding
    if (have == 2) {
        out += char(acc >> 4);
    } else if (have == 3) {
        out += char(acc >> 10);
        out += char((acc >> 2) & 0xFF);
    }
    return out;
}

}   // namespace kimi
