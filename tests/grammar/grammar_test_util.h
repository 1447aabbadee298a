// Helpers shared by the grammar tests: whole-sentence matching and every short string.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "grammar/matcher.h"

namespace kimi::grammar {

// The time bounds of the linear-time tests, in seconds of an optimised build: the sanitizer
// build (Debug, AddressSanitizer) runs them ~20x slower, and a quadratic step would still take
// minutes there.
#ifdef NDEBUG
constexpr double kSecondsScale = 1.0;
#else
constexpr double kSecondsScale = 40.0;
#endif

// The grammar takes all of s and may end there.
inline bool full_match(const Grammar& g, std::string_view s) {
    Matcher m(g);
    return m.accept(s) && m.can_end();
}

// Every string over `alphabet` of length ≤ n.
inline std::vector<std::string> all_strings(const std::string& alphabet, int n) {
    std::vector<std::string> out{""}, layer{""};
    for (int len = 1; len <= n; ++len) {
        std::vector<std::string> next;
        for (const auto& s : layer)
            for (char c : alphabet) next.push_back(s + c);
        out.insert(out.end(), next.begin(), next.end());
        layer = std::move(next);
    }
    return out;
}

}   // namespace kimi::grammar
