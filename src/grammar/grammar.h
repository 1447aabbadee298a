// Grammar: a context-free grammar over bytes, the form every constraint is compiled to (JSON
// Schema, regex, choice, and the text grammars users write). A rule is a list of alternatives;
// an alternative is a sequence of symbols; a symbol is another rule or one byte range.
// Character classes over code points are expanded into UTF-8 byte sequences (utf8_ranges.h),
// so matching never decodes and a token may end in the middle of a character.
//
// The text form (parse_grammar) is GBNF, the notation of llama.cpp's grammars:
//   root   ::= "{" ws pair ("," ws pair)* "}"      rules: name ::= alternatives
//   pair   ::= [a-z]+ ":" ws value                 "literal" (\" \\ \n \t \r \xHH \uHHHH escapes)
//   value  ::= "true" | "false" | [0-9]{1,3}       [class] [^class] with ranges and escapes, . any
//   ws     ::= [ \t\n]?                             ( group ), postfix * + ? {m} {m,} {m,n}; # comments
// The start rule is `root`. A special token is written as its text, <|name|>: it matches that
// token only (never the same text spelled by ordinary tokens), through special_token_bytes().
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace kimi::grammar {

// The bytes a grammar sees for a special token: its text between two 0xFF bytes (a byte no
// UTF-8 text holds, so ordinary text can never spell it).
constexpr uint8_t kSpecialByte = 0xFF;
inline std::string special_token_bytes(std::string_view text) {
    return std::string(1, char(kSpecialByte)) + std::string(text) + std::string(1, char(kSpecialByte));
}

struct Symbol {
    int32_t rule = -1;   // ≥ 0: a reference to rules[rule]; −1: the byte range below
    ByteRange bytes;
};
using Alternative = std::vector<Symbol>;

struct Rule {
    std::string name;
    std::vector<Alternative> alts;   // at least one; an empty alternative matches nothing (ε)
};

struct Grammar {
    std::vector<Rule> rules;
    int32_t root = 0;

    // Builders, for compilers into this form.
    int32_t add_rule(const std::string& name);   // a rule with no alternatives yet
    static Symbol ref(int32_t rule) { return Symbol{rule, {}}; }
    static Symbol byte_range(uint8_t lo, uint8_t hi) { return Symbol{-1, {lo, hi}}; }
    // A rule matching one code point of the sorted, merged ranges (negated: any other).
    int32_t add_char_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, bool negated);
    void append_literal(Alternative& alt, const std::string& utf8) const;
    // Appends a copy of other's rules (renumbered); returns the index of other's root here.
    int32_t splice(const Grammar& other);
    // A rule matching `item` zero or more times (right-recursive).
    int32_t add_star(const Alternative& item, const std::string& name);

    // Throws kimi::Error if a rule is empty, a reference is out of range, or a rule can reach
    // itself without consuming a byte (left recursion: the matcher would not terminate).
    void validate() const;
};

// Exactly one of the strings (vLLM's `choice`); at least one, each non-empty.
Grammar choice_grammar(const std::vector<std::string>& choices);

// Called now and then by a long compilation (GBNF text, a JSON Schema); it stops the work by
// throwing (a client that hung up, a deadline passed). Empty: the work is never stopped.
using CompilePoll = std::function<void()>;

// Parses GBNF text. Throws kimi::Error with the line and column of the first problem.
// max_rules bounds what repetition expands to (a user's {1,100000} is an error, not a hang).
Grammar parse_grammar(const std::string& text, size_t max_rules = 100000, const CompilePoll& poll = {});

// A GBNF string literal ("...") matching exactly these bytes (valid UTF-8).
std::string gbnf_literal(std::string_view bytes);

}   // namespace kimi::grammar
