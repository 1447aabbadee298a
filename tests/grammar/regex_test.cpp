// Regex → GBNF (regex.h): every supported feature against std::regex (ECMAScript, regex_match)
// on every short string over a small alphabet; non-ASCII patterns against hand-written
// expectations; the JSON-string mode against a small JSON encoder; every refused feature by its
// message; and a fuzz run of random patterns (an Error or a grammar parse_grammar accepts — and,
// where std::regex takes the pattern too, the same full matches).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar_test_util.h"

namespace kimi::grammar {
namespace {

struct Case {
    Case(std::string p, std::string a = "ab01\n \"", int n = 4, std::string e = "")
        : pattern(std::move(p)), alphabet(std::move(a)), len(n), ecma(std::move(e)) {}
    std::string pattern, alphabet;
    int len;
    std::string ecma;   // the same pattern for std::regex, where its syntax differs
};

void expect_like_std_regex(const Case& c) {
    SCOPED_TRACE("pattern " + c.pattern);
    std::string expr;
    ASSERT_NO_THROW(expr = regex_to_gbnf(c.pattern));
    Grammar g;
    ASSERT_NO_THROW(g = parse_grammar("root ::= " + expr)) << expr;
    const std::regex re(c.ecma.empty() ? c.pattern : c.ecma, std::regex::ECMAScript);
    int matched = 0, refused = 0;
    for (const auto& s : all_strings(c.alphabet, c.len)) {
        const bool want = std::regex_match(s, re);
        (want ? matched : refused) += 1;
        EXPECT_EQ(full_match(g, s), want) << expr << " on '" << s << "'";
    }
    EXPECT_GT(matched, 0) << "the case matches nothing";
    EXPECT_GT(refused, 0) << "the case matches everything";
}

TEST(Regex, AgreesWithStdRegex) {
    const std::vector<Case> cases = {
        {"abc", "abc"},
        {"a|b"},
        {"a|"},
        {"|a"},
        {"(a|)b"},
        {"(a|b|)0"},
        {"(|a|b0)+1?"},
        {"()a"},
        {"(a|b|)*0"},
        {"(a*)*b"},
        {"(a?b?)+"},
        {"(a?|b*){2,3}0"},
        {"((a|b)(0|1))+"},
        {"((a)|b(0|1)?)*"},
        {"(a|ab)(0|b01)"},
        {"[ab]+"},
        {"[^a]"},
        {"[^a\\n]*"},
        {"[a-b0-1]{2}"},
        {"[a-]+", "a-b"},
        {"[-b]+", "a-b"},
        {"[a\\-1]+", "a-1b"},
        {"\\d+"},
        {"\\D"},
        {"\\w*"},
        {"\\W"},
        {"\\s", "a \t\n\r\v\f"},
        {"\\S+"},
        {"[\\d\\s]+"},
        {"[^\\d\\s]"},
        {"[\\w\"]{1,2}"},
        {"[\\W]", "a\n!\"_"},
        {"."},
        {".*b"},
        {"a.?b"},
        {"a*"},
        {"a+b+"},
        {"a?b?"},
        {"a{2}"},
        {"a{2,}", "ab", 5},
        {"a{1,3}b{0,1}", "ab", 5},
        {"a{0}b"},
        {"(ab){1,2}", "ab", 5},
        {"(?:a|b)+0"},
        {"(?<x>a)b", "ab01", 4, "(a)b"},
        {"(?P<x_1>a|b)*", "ab01", 4, "(a|b)*"},
        {"a*?b"},
        {"a+?"},
        {"a??b"},
        {"(a|b){1,3}?0"},
        {"^ab$"},
        {"^(a|b)*$"},
        {"^a|b$"},
        {"(^a|b)0"},
        {"a\\nb", "ab\n"},
        {"\\t\\x61\\u0062\\u{30}", "ab0\t", 5, "\\t\\x61\\u0062\\u0030"},
        {"[\\x30-\\x31]+"},
        {"\"a\"", "a\""},
        {"\\.|\\*|\\+|\\?|\\/", ".*+?/a", 2},
        {"\\(a\\)", "()a"},
        {"\\[[\\]\\-]\\]", "[]-a"},
        {"\\{\\}\\|\\^\\$", "{}|^$", 5},
    };
    for (const Case& c : cases) expect_like_std_regex(c);
}

TEST(Regex, NonAsciiAndBeyondStdRegex) {
    struct Hand {
        std::string pattern;
        std::vector<std::string> yes, no;
    };
    const std::vector<Hand> cases = {
        {"é|日本", {"é", "日本"}, {"日", "本", "e", "é日本", ""}},
        {"[à-ü]+", {"à", "üà", "é"}, {"a", "ÿ", ""}},
        {"^.$", {"日", "😀", "a"}, {"日本", "\n", ""}},
        {"[^a]", {"é", "😀", "\n"}, {"a", "ab"}},
        {"日{2}", {"日日"}, {"日", "日日日"}},
        {"[日本]+", {"本日"}, {"日a"}},
        {"\\u00e9\\u{1F600}", {"é😀"}, {"é"}},
        {"\\uD83D\\uDE00", {"😀"}, {"\xED\xA0\xBD"}},
        {"\\x41\\U0001F600\\cJ", {"A😀\n"}, {"A😀"}},
        {"\\é\\ ", {"é "}, {"é"}},
        {"[\\u0000-\\uFFFF]", {"日", std::string(1, '\0')}, {"😀"}},
        {"[^\\u0000-\\uFFFF]", {"😀"}, {"日"}},
        {"\\.\\*\\\\\\/\\-\\[\\]\\(\\)\\{\\}\\|\\?\\+\\^\\$\\\"\\#\\%", {".*\\/-[](){}|?+^$\"#%"}, {""}},
        {"a{", {"a{"}, {"a"}},
        {"a{,", {"a{,"}, {}},
        {"a{x}", {"a{x}"}, {}},
        {"a{,}", {"a{,}"}, {"a"}},
        {"a{1", {"a{1"}, {"a"}},
        {"a{,2}", {"", "a", "aa"}, {"aaa"}},   // Python's {,n}
        {"]}", {"]}"}, {}},
        {"[\\b]", {"\b"}, {"b"}},
        {"\\0", {std::string(1, '\0')}, {"0"}},
        {"\\A(a|b)\\Z", {"a", "b"}, {"ab"}},
        {"^^a$$", {"a"}, {""}},
        {"(?:^a|^b)$", {"a", "b"}, {""}},
        {"[\\s\\S]", {"\n", "日"}, {""}},
        {"(a{2}){3}", {"aaaaaa"}, {"aaaa"}},
        {"((a*)*)*", {"", "aaa"}, {"b"}},
        {"(|)*", {""}, {"a"}},
        {"", {""}, {"a"}},
        {"a|[^\\s\\S]", {"a"}, {""}},
        {"#", {"#"}, {""}},
        {"\\#a # b", {"#a # b"}, {"#a"}},
        {"[#]\"", {"#\""}, {}},
    };
    for (const Hand& c : cases) {
        SCOPED_TRACE("pattern " + c.pattern);
        std::string expr;
        ASSERT_NO_THROW(expr = regex_to_gbnf(c.pattern));
        Grammar g;
        ASSERT_NO_THROW(g = regex_grammar(c.pattern)) << expr;
        for (const auto& s : c.yes) EXPECT_TRUE(full_match(g, s)) << expr << " on '" << s << "'";
        for (const auto& s : c.no) EXPECT_FALSE(full_match(g, s)) << expr << " on '" << s << "'";
    }
}

TEST(Regex, OutputIsReadableGbnf) {
    EXPECT_EQ(regex_to_gbnf("^abc$"), "\"abc\"");
    EXPECT_EQ(regex_to_gbnf("[0-9]{3}-\\d+"), "[0-9]{3} \"-\" [0-9]+");
    EXPECT_EQ(regex_to_gbnf("a|"), "\"a\"?");
    EXPECT_EQ(regex_to_gbnf("a|b|"), "(\"a\" | \"b\" |)");
    EXPECT_EQ(regex_to_gbnf("[^\"\\\\]"), "[^\"\\\\]");
    EXPECT_EQ(regex_to_gbnf("."), "[^\\x0A]");
    EXPECT_EQ(regex_to_gbnf("[\\]\\-^]"), "[\\-\\]\\^]");
    EXPECT_EQ(regex_to_gbnf("(a*)*"), "(\"a\"+)*");
}

// The body of a JSON string holding s (no quotes around it).
std::string json_body(const std::string& s) {
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"')
            out += "\\\"";
        else if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\b')
            out += "\\b";
        else if (c == '\f')
            out += "\\f";
        else if (c < 0x20)
            out += "\\u00" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
        else
            out += ch;
    }
    return out;
}

Grammar json_string_grammar(const std::string& pattern) {
    return parse_grammar("root ::= \"\\\"\" " + regex_to_gbnf(pattern, RegexMode::kJsonString) + " \"\\\"\"");
}

TEST(Regex, JsonStringModeAcceptsTheEncodingsOfMatches) {
    const std::vector<std::string> patterns = {"a.b",     ".*",   "[^a]+", "[\"\\\\]*", "\\W",      "[\\s\\S]b?",
                                               "(a|\")+", "\\\\", "\"?a",  "[^\\\\]*",  "\\D{1,2}", "[^\"]+"};
    for (const std::string& p : patterns) {
        SCOPED_TRACE("pattern " + p);
        const Grammar g = json_string_grammar(p);
        const std::regex re(p, std::regex::ECMAScript);
        for (const auto& s : all_strings("ab\"\\ 1", 4)) {
            const bool want = std::regex_match(s, re);
            EXPECT_EQ(full_match(g, "\"" + json_body(s) + "\""), want) << "on '" << s << "'";
            if (s.find('"') != std::string::npos && s.find('\\') == std::string::npos) {
                EXPECT_FALSE(full_match(g, "\"" + s + "\"")) << "a raw quote in '" << s << "'";
            }
        }
    }
}

TEST(Regex, JsonStringModeEscapes) {
    const Grammar dot = json_string_grammar("a.b");
    EXPECT_TRUE(full_match(dot, R"("a\"b")"));
    EXPECT_FALSE(full_match(dot, R"("a"b")"));
    EXPECT_TRUE(full_match(dot, R"("a\\b")"));
    EXPECT_FALSE(full_match(dot, R"("a\b")"));   // \b is the escape of a control character
    EXPECT_FALSE(full_match(dot, "\"a\nb\""));
    EXPECT_FALSE(full_match(dot, "\"a\tb\""));
    EXPECT_FALSE(full_match(dot, R"("a\nb")"));   // classes exclude control characters
    EXPECT_TRUE(full_match(dot, "\"a日b\""));
    EXPECT_TRUE(full_match(dot, "\"a/b\""));   // nothing else is escaped
    EXPECT_FALSE(full_match(dot, R"("a\/b")"));

    const Grammar not_a = json_string_grammar("[^a]");
    EXPECT_TRUE(full_match(not_a, R"("\"")"));
    EXPECT_FALSE(full_match(not_a, "\"\"\""));
    EXPECT_FALSE(full_match(not_a, "\"\n\""));
    EXPECT_FALSE(full_match(not_a, R"("\n")"));
    EXPECT_TRUE(full_match(not_a, "\"é\""));

    const Grammar newline = json_string_grammar("a\\nb\\t\\r\\x08\\f\\x01\\x1F\\v");
    EXPECT_TRUE(full_match(newline, R"("a\nb\t\r\b\f\u0001\u001f\u000b")"));
    EXPECT_FALSE(full_match(newline, "\"a\nb\t\r\b\f\x01\x1f\v\""));
    EXPECT_FALSE(full_match(newline, R"("a\nb\t\r\b\f\u0001\u001F\u000b")"));   // lowercase hex only

    const Grammar quote = json_string_grammar("\"\\\\");
    EXPECT_TRUE(full_match(quote, R"("\"\\")"));
    EXPECT_FALSE(full_match(quote, R"(""\")"));

    const Grammar space = json_string_grammar("\\s");
    EXPECT_TRUE(full_match(space, "\" \""));
    EXPECT_FALSE(full_match(space, R"("\t")"));

    EXPECT_THROW(json_string_grammar("[\\n]"), Error);   // nothing left once controls are out
    EXPECT_NO_THROW(json_string_grammar("a|[\\n]"));
    EXPECT_NO_THROW(regex_to_gbnf("[\\n]"));
}

TEST(Regex, RefusedFeaturesAreNamed) {
    std::vector<std::pair<std::string, std::string>> bad = {
        {"(a)\\1", "backreferences (\\1)"},
        {"(?<n>a)\\k<n>", "backreferences (\\k<name>)"},
        {"(?P<n>a)(?P=n)", "backreferences (?P=name)"},
        {"a(?=b)", "lookahead"},
        {"a(?!b)", "lookahead"},
        {"(?<=a)b", "lookbehind"},
        {"(?<!a)b", "lookbehind"},
        {"(?i)a", "inline flags"},
        {"(?i:a)", "inline flags"},
        {"(?-i:a)", "inline flags"},
        {"\\bfoo", "word boundaries"},
        {"a\\Bb", "word boundaries"},
        {"a^b", "'^'"},
        {"a(^b)", "'^'"},
        {"a$b", "'$'"},
        {"(a$)b", "'$'"},
        {"(^a)*", "cannot hold '^' or '$'"},
        {"(a", "unbalanced '('"},
        {"((a)", "unbalanced '('"},
        {"a)", "unbalanced ')'"},
        {"[ab", "unterminated character class"},
        {"[a\\]", "unterminated character class"},
        {"*a", "nothing to repeat"},
        {"a|*", "nothing to repeat"},
        {"(+)", "nothing to repeat"},
        {"{2}", "nothing to repeat"},
        {"^*", "nothing to repeat"},
        {"a$?", "nothing to repeat"},
        {"a**", "multiple repeat"},
        {"a{2}{3}", "multiple repeat"},
        {"a*??", "multiple repeat"},
        {"a*+", "possessive"},
        {"a{3,2}", "n < m"},
        {"a{10001}", "repetition count too large"},
        {"a{1,99999999999}", "repetition count too large"},
        {"\\p{L}", "Unicode property"},
        {"[\\P{L}]", "Unicode property"},
        {"(?>a)", "atomic groups"},
        {"(?#c)a", "comments"},
        {"(?(1)a|b)", "conditional"},
        {"(?Qa)", "unknown group syntax"},
        {"(?<1a>x)", "invalid group name"},
        {"(?P<a", "invalid group name"},
        {"\\q", "unknown escape '\\q'"},
        {"[\\B]", "unknown escape '\\B'"},
        {"[]a]", "empty character class"},
        {"[^]", "empty character class"},
        {"[z-a]", "out of order"},
        {"[\\d-z]", "range endpoint"},
        {"\\x4", "needs 2 hex digits"},
        {"\\u12", "needs 4 hex digits"},
        {"\\u{110000}", "beyond U+10FFFF"},
        {"\\u{41", "closing '}'"},
        {"\\uD800", "lone surrogate"},
        {"\\uDC00\\uD800", "lone surrogate"},
        {"\\x{41}", "needs 2 hex digits"},
        {"\\012", "octal"},
        {"[\\1]", "octal"},
        {"\\c1", "\\c needs a letter"},
        {"a\\", "trailing backslash"},
        {"\xFF", "invalid UTF-8"},
        {"\xC3", "invalid UTF-8"},
        {"\xED\xA0\x80", "invalid UTF-8"},
        {"[^\\s\\S]", "matches no string"},
        {std::string(101, '(') + std::string(101, ')'), "nested too deeply"},
    };
    std::string nested = "a{0,9999}";
    for (int i = 0; i < 9; ++i) nested = "(" + nested + "){0,9999}";
    bad.push_back({nested, "too large"});
    for (const auto& [pattern, what] : bad) {
        SCOPED_TRACE("pattern " + pattern);
        try {
            const std::string expr = regex_to_gbnf(pattern);
            ADD_FAILURE() << "accepted as " << expr.substr(0, 200);
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(msg.rfind("regex: ", 0), 0u) << msg;
            EXPECT_NE(msg.find(what), std::string::npos) << msg;
            if (what != "too large" && what != "matches no string") {
                EXPECT_NE(msg.find("(at position "), std::string::npos) << msg;
            }
        }
    }
    try {
        regex_to_gbnf("ab(?=c)");
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("at position 2"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(regex_grammar("a{10000}"));
    EXPECT_NO_THROW(regex_grammar("(a{0,10000}){0,10000}"));
}

// A random well-formed pattern over "ab0 ": classes, class escapes, groups (capturing or not,
// possibly empty), alternation with empty branches, and every quantifier, lazy forms included.
// A group that holds a quantifier gets only ? or ?? (std::regex backtracks exponentially on
// nested repetition; the hand-written cases cover that). `quantified`: the pattern holds one.
std::string random_pattern(Rng& rng, int depth, bool& quantified) {
    static const char* atoms[] = {"a",      "b",   "0",   " ",   "[ab]", "[^a]", "[a-b0]", "[^\\s0]",
                                  "[\\d ]", "\\d", "\\w", "\\s", "\\W",  ".",    "\\x61",  "()"};
    static const char* any[] = {"*",   "+",  "?",  "{2}", "{1,}",   "{0,2}", "{1,2}",
                                "{0}", "*?", "+?", "??",  "{0,1}?", "{2,}?"};
    static const char* optional[] = {"?", "??"};
    std::string out;
    const int branches = rng.below(3) == 0 ? 2 + int(rng.below(2)) : 1;
    for (int b = 0; b < branches; ++b) {
        if (b) out += '|';
        const int items = int(rng.below(4));
        for (int i = 0; i < items; ++i) {
            bool inner = false;
            if (depth < 3 && rng.below(4) == 0)
                out += std::string(rng.below(2) ? "(" : "(?:") + random_pattern(rng, depth + 1, inner) + ")";
            else
                out += atoms[rng.below(std::size(atoms))];
            if (rng.below(2) == 0) {
                out += inner ? optional[rng.below(std::size(optional))] : any[rng.below(std::size(any))];
                inner = true;
            }
            quantified |= inner;
        }
    }
    return out;
}

TEST(Regex, RandomPatternsAgreeWithStdRegex) {
    Rng rng(5);
    const auto strings = all_strings("ab0 ", 4);
    for (int i = 0; i < 300; ++i) {
        bool quantified = false;
        const std::string p = random_pattern(rng, 0, quantified);
        SCOPED_TRACE("pattern " + p);
        Grammar g;
        ASSERT_NO_THROW(g = regex_grammar(p));
        const std::regex re(p, std::regex::ECMAScript);
        for (const auto& s : strings)
            EXPECT_EQ(full_match(g, s), std::regex_match(s, re)) << regex_to_gbnf(p) << " on '" << s << "'";
    }
}

// Random patterns: an Error or valid GBNF, in both modes; where std::regex reads an ASCII pattern
// the same way, the same full matches on every string over "ab0" up to length 3.
TEST(Regex, FuzzPatterns) {
    const std::vector<std::string> tokens = {"a",    "b",   "0",   "a",     "b",     "|",       "|",    "(",    "(",
                                             ")",    ")",   "(?:", "[",     "]",     "[^",      "-",    "^",    "$",
                                             "*",    "+",   "?",   "{",     "}",     ",",       "1",    "2",    "\\d",
                                             "\\w",  "\\s", "\\W", ".",     "{2}",   "{1,2}",   "{0,}", "{,2}", "*?",
                                             "\\1",  "\\b", "(?=", "(?<n>", "\\x61", "\\u0062", "\\",   "é",    "\"",
                                             "\\\\", "\\n", "\\-", "\\]",   "{0}",   "()"};
    Rng rng(7);
    const auto strings = all_strings("ab0", 3);
    int accepted = 0, compared = 0;
    for (int i = 0; i < 2000; ++i) {
        std::string p;
        const int n = 1 + int(rng.below(10));
        for (int k = 0; k < n; ++k) p += tokens[rng.below(tokens.size())];
        SCOPED_TRACE("pattern " + p);
        for (const RegexMode mode : {RegexMode::kText, RegexMode::kJsonString}) {
            std::string expr;
            try {
                expr = regex_to_gbnf(p, mode);
            } catch (const Error&) {
                continue;
            } catch (...) {
                ADD_FAILURE() << "an exception other than kimi::Error";
                continue;
            }
            Grammar g;
            try {
                g = parse_grammar("root ::= " + expr);
            } catch (const std::exception& e) {
                ADD_FAILURE() << "invalid GBNF " << expr << ": " << e.what();
                continue;
            }
            if (mode != RegexMode::kText) continue;
            ++accepted;
            // std::regex reads é as bytes, {,n} as literal text, and has no named groups
            if (p.find("é") != std::string::npos || p.find("{,") != std::string::npos ||
                p.find("(?<n>") != std::string::npos)
                continue;
            std::regex re;
            try {
                re = std::regex(p, std::regex::ECMAScript);
            } catch (const std::regex_error&) {
                continue;
            }
            ++compared;
            for (const auto& s : strings)
                EXPECT_EQ(full_match(g, s), std::regex_match(s, re)) << expr << " on '" << s << "'";
        }
    }
    EXPECT_GT(accepted, 300);
    EXPECT_GT(compared, 200);
}

}   // namespace
}   // namespace kimi::grammar
