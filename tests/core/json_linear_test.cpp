// parse_json_linear (src/core/json_linear.h) builds exactly what nlohmann's parser builds
// (key order, repeated keys: first place, last value; numbers of each kind; strings with
// escapes), refuses what it refuses, and takes linear time on objects of many keys.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/json_linear.h"
#include "core/rng.h"

namespace kimi {
namespace {

using J = nlohmann::ordered_json;

// Random JSON text, with repeated keys and odd spacing.
std::string random_json(Rng& r, int depth) {
    const uint64_t kind = depth > 4 ? r.below(5) : r.below(7);
    switch (kind) {
        case 0: return "null";
        case 1: return r.below(2) ? "true" : "false";
        case 2: return std::to_string(int64_t(r.below(2000000)) - 1000000);
        case 3: return std::to_string(r.uniform(-1e6, 1e6));
        case 4: return r.below(2) ? "\"k" + std::to_string(r.below(5)) + "\\n\\u00e9\"" : "18446744073709551615";
        case 5: {
            std::string s = "[";
            for (uint64_t i = 0, n = r.below(5); i < n; ++i) s += (i ? " , " : "") + random_json(r, depth + 1);
            return s + "]";
        }
        default: {
            std::string s = "{";
            for (uint64_t i = 0, n = r.below(6); i < n; ++i)
                s += std::string(i ? "," : "") + "\"k" + std::to_string(r.below(4)) +
                    "\" : " + random_json(r, depth + 1);
            return s + "}";
        }
    }
}

TEST(JsonLinear, BuildsWhatTheParserBuilds) {
    Rng r(5);
    for (int i = 0; i < 3000; ++i) {
        const std::string text = random_json(r, 0);
        const J want = J::parse(text);
        const J got = parse_json_linear(text);
        ASSERT_EQ(got.dump(), want.dump()) << text;
    }
    EXPECT_EQ(parse_json_linear(R"({"a":1,"b":2,"a":{"c":[3]}})").dump(), R"({"a":{"c":[3]},"b":2})");
}

TEST(JsonLinear, RefusesMalformedText) {
    for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "nul", "\"\\x\"", "[1] 2", "{\"a\":[}"})
        EXPECT_THROW(parse_json_linear(bad), nlohmann::json::parse_error) << bad;
}

TEST(JsonLinear, ManyKeysInLinearTime) {
    std::string text = "{";
    for (int i = 0; i < 200000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    text += "}";
    const auto t0 = std::chrono::steady_clock::now();
    const J j = parse_json_linear(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(j.size(), 200000u);
    EXPECT_EQ(j.begin().key(), "k0");
    EXPECT_LT(s, 5.0);   // nlohmann's own parser takes ~30 s here (quadratic); this is ~0.1 s
}

}   // namespace
}   // namespace kimi
