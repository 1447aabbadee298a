// Regex → GBNF: translates a regular expression (the ECMAScript / Python `re` subset used by JSON
// Schema `pattern` and vLLM's `regex` structured output) into one GBNF expression (grammar.h),
// with full-match semantics. Supported: literals (any UTF-8), escapes (\n \t \r \f \v \0 \xHH
// \uHHHH \u{H..} \UHHHHHHHH \cX, escaped punctuation), \d \w \s \D \W \S (ASCII meanings),
// [...] and [^...] with ranges, `.` (any character but \n), groups ( ) (?: ) (?<name> )
// (?P<name> ), alternation (empty branches too), * + ? {m} {m,} {m,n} {,n} and their lazy forms
// (laziness does not change which strings fully match). ^ / \A and $ / \Z are accepted where they
// change nothing: before anything has been matched (the start of the pattern, or of a branch or
// group that starts it) and after the last thing matched. Everything else (backreferences,
// lookaround, inline flags, \b \B, \p{..}, atomic groups, possessive quantifiers, ...) is refused
// with a kimi::Error "regex: ..." that names the feature and its position (byte offset, from 0).
#pragma once
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace kimi::grammar {

enum class RegexMode {
    kText,   // the expression matches the strings themselves (UTF-8)
    // The expression matches the JSON-encoded body (between the quotes) of such a string: '"' and
    // '\' are written \" and \\, other characters as themselves. Control characters U+0000-U+001F
    // never appear raw: a literal one in the pattern becomes its JSON escape (\n \t \r \b \f or
    // \u00xx, lowercase hex), and classes, `.` and negated classes exclude them altogether.
    kJsonString,
};

// One GBNF expression (no rule definitions: the right side of a rule) matching exactly the
// strings the pattern fully matches. Throws kimi::Error("regex: ...") for unsupported or invalid
// patterns, repetition counts over 10000, and patterns that would expand too far.
std::string regex_to_gbnf(std::string_view pattern, RegexMode mode = RegexMode::kText);

// parse_grammar("root ::= " + regex_to_gbnf(pattern)).
Grammar regex_grammar(std::string_view pattern);

}   // namespace kimi::grammar
