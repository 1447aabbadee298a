// base64 (src/core/base64.h): the strict decoder of tiktoken files stays strict, and the lenient
// one takes what HTTP clients send (wrapped lines, the URL-safe alphabet, no padding) while still
// refusing characters outside base64.
#include <gtest/gtest.h>

#include <string>

#include "core/base64.h"
#include "core/rng.h"

namespace kimi {
namespace {

std::string random_bytes(Rng& r, size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = char(r.below(256));
    return s;
}

// `base64`'s default output: lines of 76 columns ending in `eol`.
std::string wrapped(const std::string& b64, const std::string& eol) {
    std::string out;
    for (size_t i = 0; i < b64.size(); i += 76) out += b64.substr(i, 76) + eol;
    return out;
}

std::string url_safe(std::string s) {
    for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
    return s;
}

std::string unpadded(std::string s) {
    while (!s.empty() && s.back() == '=') s.pop_back();
    return s;
}

TEST(Base64, StrictRoundTripAndRefusals) {
    Rng r(7);
    for (size_t n = 0; n < 70; ++n) {
        const std::string raw = random_bytes(r, n);
        EXPECT_EQ(base64_decode(base64_encode(raw)), raw) << n;
    }
    EXPECT_EQ(base64_decode("YWJj"), "abc");
    for (const char* bad : {"YQ", "YQ=", "Y=Q=", "!!!!", "YW Jj", "YWJj\n", "-_-_", "YQ==YQ=="})
        EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
}

TEST(Base64, LenientTakesWhatStrictTakes) {
    Rng r(11);
    for (size_t n = 0; n < 200; ++n) {
        const std::string raw = random_bytes(r, n);
        EXPECT_EQ(base64_decode_lenient(base64_encode(raw)), raw) << n;
    }
}

TEST(Base64, LenientWrappedUrlSafeUnpadded) {
    Rng r(13);
    for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(56), size_t(57), size_t(58), size_t(1000), size_t(4097)}) {
        const std::string raw = random_bytes(r, n);
        const std::string b64 = base64_encode(raw);
        EXPECT_EQ(base64_decode_lenient(wrapped(b64, "\n")), raw) << n;
        EXPECT_EQ(base64_decode_lenient(wrapped(b64, "\r\n")), raw) << n;
        EXPECT_EQ(base64_decode_lenient(url_safe(b64)), raw) << n;
        EXPECT_EQ(base64_decode_lenient(unpadded(b64)), raw) << n;
        EXPECT_EQ(base64_decode_lenient(wrapped(url_safe(unpadded(b64)), "\r\n")), raw) << n;
        EXPECT_EQ(base64_decode_lenient(" \t" + b64 + " \n"), raw) << n;
    }
    EXPECT_EQ(base64_decode_lenient("YQ"), "a");
    EXPECT_EQ(base64_decode_lenient("YWI"), "ab");
    EXPECT_EQ(base64_decode_lenient("YQ==\n"), "a");
    EXPECT_EQ(base64_decode_lenient("YQ=\n="), "a");
    EXPECT_EQ(base64_decode_lenient("-_-_"), std::string("\xfb\xff\xbf", 3));
    EXPECT_EQ(base64_decode_lenient(""), "");
    EXPECT_EQ(base64_decode_lenient("\r\n"), "");
}

TEST(Base64, LenientStillRefusesInvalid) {
    for (const char* bad : {"!!!!", "YW@j", "YWJj.", "YQ==YQ==", "YQ=a", "Y", "YWJjY", "YQ=", "YWJ==", "YQ===", "=",
                            "====", "YWJj=", "YW\x01j", "YWJj\xc3\xa9", "YW%3D"})
        EXPECT_FALSE(base64_decode_lenient(bad).has_value()) << bad;
    EXPECT_FALSE(base64_decode_lenient(std::string("YW\0j", 4)).has_value());
}

}   // namespace
}   // namespace kimi
