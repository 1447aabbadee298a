// Number ranges as grammar: the JSON numbers inside [lo, hi] (each end optional, inclusive or
// exclusive), written without exponents. Integers cover every integer in the range (up to 15
// digits where an end is open); a number may also have a fraction where its integer part
// leaves room (i.f for lo ≤ i and i + 1 ≤ hi), so every value written is inside the bounds.
// ref: llama.cpp's json-schema-to-grammar integer ranges, rewritten as digit-prefix splits.
#pragma once
#include <optional>
#include <string>

namespace kimi::grammar {

struct NumberBounds {
    std::optional<double> lo, hi;
    bool lo_exclusive = false, hi_exclusive = false;
};

// A GBNF expression. Throws kimi::Error naming the keyword when no integer (integer = true)
// or no number fits, or an end lies beyond ±1e15.
std::string number_range_gbnf(const NumberBounds& b, bool integer);

}   // namespace kimi::grammar
