// Grammars over bytes: UTF-8 sequences of code-point ranges against brute force; GBNF parsing
// (every construct, errors with positions, left recursion and oversized repetition refused);
// the matcher against std::regex on every string of a small alphabet up to length 6 — whole
// sentences and viable prefixes — and byte by byte through multi-byte characters.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "grammar_test_util.h"

namespace kimi::grammar {
namespace {

std::string utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80)
        s += char(cp);
    else if (cp < 0x800)
        s += char(0xC0 | cp >> 6), s += char(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
        s += char(0xE0 | cp >> 12), s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
    else
        s += char(0xF0 | cp >> 18), s += char(0x80 | ((cp >> 12) & 0x3F)), s += char(0x80 | ((cp >> 6) & 0x3F)),
            s += char(0x80 | (cp & 0x3F));
    return s;
}

bool matches_any(const std::vector<Utf8Sequence>& seqs, const std::string& bytes) {
    for (const Utf8Sequence& s : seqs) {
        if (s.size() != bytes.size()) continue;
        bool ok = true;
        for (size_t i = 0; i < s.size(); ++i) ok &= uint8_t(bytes[i]) >= s[i].lo && uint8_t(bytes[i]) <= s[i].hi;
        if (ok) return true;
    }
    return false;
}

TEST(Utf8Ranges, SequencesMatchExactlyTheRange) {
    Rng rng(3);
    const std::vector<std::pair<uint32_t, uint32_t>> cases = {
        {0, 0x10FFFF},    {0x41, 0x5A},      {0x7F, 0x80},       {0x7FF, 0x800},     {0x3B1, 0x3C9},
        {0xD000, 0xE100}, {0xFFFF, 0x10000}, {0x1F600, 0x1F64F}, {0x12345, 0x10FFFF}};
    for (const auto& [lo, hi] : cases) {
        const auto seqs = utf8_sequences(lo, hi);
        for (int i = 0; i < 20000; ++i) {
            uint32_t cp = uint32_t(rng.below(0x110000));
            if (i < 64)
                cp = std::min<uint32_t>(0x10FFFF, (i % 2 ? hi : lo) + uint32_t(i / 2) - 16);   // around the edges
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            EXPECT_EQ(matches_any(seqs, utf8(cp)), cp >= lo && cp <= hi) << std::hex << lo << "-" << hi << " cp " << cp;
        }
    }
}

void expect_like_regex(const std::string& gbnf, const std::string& re, const std::string& alphabet, int n) {
    const Grammar g = parse_grammar(gbnf);
    const std::regex r(re);
    const auto strings = all_strings(alphabet, n);
    std::vector<std::string> in_language;
    for (const auto& s : strings)
        if (std::regex_match(s, r)) in_language.push_back(s);
    ASSERT_FALSE(in_language.empty()) << gbnf;
    for (const auto& s : strings) {
        Matcher m(g);
        const bool took = m.accept(s);
        const bool whole = took && m.can_end();
        EXPECT_EQ(whole, std::regex_match(s, r)) << gbnf << " on '" << s << "'";
        // a prefix is viable exactly when some sentence (within the enumeration) extends it
        bool extends = false;
        for (const auto& t : in_language) extends |= t.compare(0, s.size(), s) == 0;
        if (extends) {
            EXPECT_TRUE(took) << gbnf << ": the prefix '" << s << "' was refused";
        }
    }
}

TEST(GrammarMatcher, AgreesWithRegex) {
    expect_like_regex(R"(root ::= [a-b]+ ("x" | "yz")? [0-1]{2,3})", "[a-b]+(x|yz)?[0-1]{2,3}", "abxyz01", 6);
    expect_like_regex(R"(root ::= ("ab" | "a")* "b")", "(ab|a)*b", "ab", 6);
    expect_like_regex("root ::= item (\",\" item)*\nitem ::= [^,]{1,2}   # a comment\n", "[^,]{1,2}(,[^,]{1,2})*",
                      "a,b", 6);
    expect_like_regex(R"g(root ::= "(" root ")" | "")g", "(\\(\\(\\(\\)\\)\\))|(\\(\\(\\)\\))|(\\(\\))|", "()",
                      6);   // recursion
    expect_like_regex(R"(root ::= . . "z"?)", "..z?", "az", 4);
    expect_like_regex(R"(root ::= [a\-c]{0,} [\x61]{1})", "[a\\-c]*a", "a-cb", 5);
}

TEST(GrammarMatcher, MultiByteCharactersByteByByte) {
    const Grammar g = parse_grammar(R"(root ::= [α-ω]+ "!" )");
    Matcher m(g);
    const std::string s = "αβγ!";
    for (size_t i = 0; i < s.size(); ++i) {
        EXPECT_FALSE(m.can_end()) << i;
        ASSERT_TRUE(m.accept_byte(uint8_t(s[i]))) << i;
    }
    EXPECT_TRUE(m.can_end());
    Matcher n(g);
    EXPECT_FALSE(n.accept("a"));
    EXPECT_TRUE(n.accept("\xCE"));    // the first byte of α..ο
    EXPECT_FALSE(n.accept("\x80"));   // U+0380 is not in α-ω
    EXPECT_TRUE(n.accept("\xB1"));    // α
    const Grammar any = parse_grammar(R"(root ::= [^"]*)");
    Matcher k(any);
    EXPECT_TRUE(k.accept("héllo 😀"));
    EXPECT_FALSE(k.accept("\""));
    EXPECT_FALSE(k.accept("\xC0\x80"));       // overlong: not UTF-8
    EXPECT_FALSE(k.accept("\xED\xA0\x80"));   // a surrogate: not UTF-8
    EXPECT_TRUE(k.can_end());
}

TEST(GrammarMatcher, RepetitionDoesNotGrowTheStacks) {
    const Grammar g = parse_grammar(R"(root ::= ("ab" [0-9]*)*)");
    Matcher m(g);
    size_t most = 0, deepest = 0;
    for (int i = 0; i < 2000; ++i) {
        ASSERT_TRUE(m.accept(i % 7 == 0 ? "ab" : "5"));
        most = std::max(most, m.n_stacks());
        deepest = std::max(deepest, m.depth());
    }
    EXPECT_TRUE(m.can_end());
    EXPECT_LE(most, 4u);
    EXPECT_LE(deepest, 4u);
}

// Ambiguous grammars keep many parses alive: the stack set is capped (in stacks and in frames),
// so steps stay cheap, and what is accepted is still a sentence.
TEST(GrammarMatcher, AmbiguousGrammarStaysBounded) {
    std::string wide = "root ::= ";
    for (int i = 0; i < 2000; ++i) wide += (i ? " | \"a\" \"x" : "\"a\" \"x") + std::to_string(i) + "\"";
    const Grammar w = parse_grammar(wide);
    Matcher m(w);
    ASSERT_TRUE(m.accept("a"));
    EXPECT_EQ(m.n_stacks(), StackSet::kMaxStacks);
    EXPECT_TRUE(m.accept("x5") && m.can_end());

    const Grammar g = parse_grammar(R"(root ::= "a" root | "a" root "b" | "c")");   // a^n c b^k, k <= n
    Matcher d(g);
    for (int i = 0; i < 400; ++i) ASSERT_TRUE(d.accept("a"));
    EXPECT_LE(d.stacks().frames.size(), StackSet::kMaxFrames);
    EXPECT_TRUE(d.accept("cbb") && d.can_end());
    for (const std::string& s : all_strings("abc", 6)) {
        const size_t n = s.find_first_not_of('a'), c = s.find('c');
        const bool want = n != std::string::npos && c == n && s.find_first_not_of('b', c + 1) == std::string::npos &&
            s.size() - c - 1 <= n;
        EXPECT_EQ(full_match(g, s), want) << s;
    }
}

// Reproduced by fuzz_grammar as a timeout (fuzz/corpus/fuzz_grammar/crash-settle-empty-choices):
// rules that match nothing in several ways made settling exponential — (""|"") forty times hung the matcher's
// constructor (2^40 paths to one stack), and so did nested alternatives that each keep a frame
// (2^30 stacks). Each stack is now expanded once per step, and a step's expansions are capped.
TEST(GrammarMatcher, PathsThroughEmptyRulesStayBounded) {
    std::string twice = "root ::= ";
    for (int i = 0; i < 40; ++i) twice += "(\"\" | \"\") ";
    const Grammar g = parse_grammar(twice + "\"a\" (\"\" | \"\")");
    EXPECT_TRUE(full_match(g, "a"));
    EXPECT_FALSE(full_match(g, "aa"));

    std::string nested = "root ::= r0 \"a\"\ne ::= \"\"\n";
    for (int i = 0; i < 30; ++i)
        nested += "r" + std::to_string(i) + " ::= " + (i < 29 ? "r" + std::to_string(i + 1) : "\"\"") + " e | " +
            (i < 29 ? "r" + std::to_string(i + 1) : "\"\"") + " e e\n";
    const Grammar n = parse_grammar(nested);
    Matcher m(n);
    EXPECT_LE(m.n_stacks(), StackSet::kMaxStacks);
    EXPECT_TRUE(m.accept("a") && m.can_end());
}

// The trie walk gives the mask brute force gives (every token tried on a copy of the matcher),
// from states along a sentence, for random vocabularies with shared prefixes and multi-byte
// pieces (tokens that end inside a character included).
TEST(TokenTrie, MasksMatchBruteForce) {
    const Grammar g = parse_grammar(R"g(root ::= "{" pair ("," pair)* "}"
pair ::= "\"" [a-cé]{1,3} "\":" [0-9]+)g");
    Rng rng(11);
    const std::string pieces[] = {"{", "}", "\"", ":", ",", "a", "b", "c", "1", "2", "\xC3", "\xA9", "x", " "};
    for (int trial = 0; trial < 5; ++trial) {
        std::vector<std::string> vocab{""};   // id 0: a special token, no bytes
        for (int t = 0; t < 400; ++t) {
            std::string s;
            const int n = 1 + int(rng.below(4));
            for (int k = 0; k < n; ++k) s += pieces[rng.below(std::size(pieces))];
            vocab.push_back(s);
        }
        const TokenTrie trie(vocab);
        Matcher m(g);
        const std::string sentence = "{\"a\xC3\xA9\":12,\"cc\":7}";
        std::vector<uint8_t> fast;
        size_t n_allowed = 0;
        for (size_t i = 0; i <= sentence.size(); ++i) {
            trie.allowed(m, fast);
            for (uint8_t f : fast) n_allowed += f;
            for (size_t t = 0; t < vocab.size(); ++t) {
                Matcher copy = m;
                const bool ok = !vocab[t].empty() && copy.accept(vocab[t]);
                ASSERT_EQ(fast[t] != 0, ok) << "trial " << trial << " at byte " << i << " token '" << vocab[t] << "'";
            }
            if (i < sentence.size()) {
                ASSERT_TRUE(m.accept_byte(uint8_t(sentence[i])));
            }
        }
        EXPECT_TRUE(m.can_end());
        EXPECT_GT(n_allowed, 20u) << "trial " << trial;   // the masks are not all empty
    }
}

// choice: exactly one of the strings, prefixes of longer ones included, nothing else.
TEST(GrammarChoice, ExactlyOneOfTheStrings) {
    const Grammar g = choice_grammar({"yes", "no", "yesterday", "naïve"});
    for (const std::string s : {"yes", "no", "yesterday", "naïve"}) {
        Matcher m(g);
        EXPECT_TRUE(m.accept(s) && m.can_end()) << s;
    }
    for (const std::string s : {"ye", "yess", "n", "nay", "", "yesterdays"}) {
        Matcher m(g);
        EXPECT_FALSE(m.accept(s) && m.can_end()) << s;
    }
    Matcher m(g);
    ASSERT_TRUE(m.accept("yes"));
    EXPECT_TRUE(m.can_end());       // "yes" may end here
    EXPECT_TRUE(m.accept("ter"));   // or go on to "yesterday"
    EXPECT_FALSE(m.can_end());
    EXPECT_THROW(choice_grammar({}), Error);
    EXPECT_THROW(choice_grammar({"a", ""}), Error);
}

TEST(GrammarParser, ErrorsNameThePlace) {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"root ::= \"abc", "unterminated string"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= [z-a]", "out of order"},
        {"root ::= item", "'item' is used but not defined"},
        {"item ::= \"a\"", "no rule named 'root'"},
        {"root ::= root \"a\" | \"b\"", "left-recursive"},
        {"root ::= x \"a\"\nx ::= \"\" | root", "left-recursive"},
        {"root ::= \"a\"{3,1}", "n < m"},
        {"root ::= \"a\"{1,999999}", "repetition too large"},
        {"root ::= \"abcdefghijklmnopqrstuvwxyz0123456789\"{20000}", "repetition too large"},
        {"root ::= (\"a\"", "expected ')'"},
        {"root ::= \"a\" )", "unbalanced"},
        {"root \"a\"", "expected '::='"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
        {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
        {"root ::= " + std::string(20000, '(') + "\"a\"" + std::string(20000, ')'),
         "groups nested deeper than 100 levels"},
    };
    for (const auto& [text, needle] : bad) {
        try {
            parse_grammar(text, 10000);
            ADD_FAILURE() << "accepted: " << text;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << text << " -> " << e.what();
        }
    }
    try {
        parse_grammar("root ::= \"a\"\n  \"b\" ?? @", 10000);
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    }
}

// Groups nest up to the limit; a chain of 20,000 rules (nesting through names, not the parser's
// recursion) is a grammar like any other.
TEST(GrammarParser, NestingLimits) {
    const auto nested = [](int n) {
        return "root ::= " + std::string(size_t(n), '(') + "\"a\"" + std::string(size_t(n), ')');
    };
    EXPECT_NO_THROW(parse_grammar(nested(100), 10000));
    EXPECT_THROW(parse_grammar(nested(101), 10000), Error);
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 20000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    chain += "r20000 ::= \"a\"\n";
    EXPECT_NO_THROW(parse_grammar(chain, 100000));
}

// Nullable rules are found in time linear in the grammar. A fixed point over passes in rule
// order needed one pass per rule of a chain written against that order (each rule reaching
// the empty string through the next): 100,000 rules were O(n²), minutes of a core.
TEST(GrammarParser, NullableChainsAreLinear) {
    std::string chain = "root ::= r0 \"a\"\n";
    for (int i = 0; i < 99990; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    chain += "r99990 ::= \"\"\n";
    const auto t0 = std::chrono::steady_clock::now();
    const Grammar g = parse_grammar(chain, 100000);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0 * kSecondsScale);
    EXPECT_EQ(g.rules.size(), 99992u);
    std::string short_chain = "root ::= r0 \"a\"\n";   // the same shape, matched
    for (int i = 0; i < 20; ++i) short_chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    short_chain += "r20 ::= \"\"\n";
    const Grammar short_g = parse_grammar(short_chain, 100000);
    Matcher m(short_g);
    EXPECT_TRUE(m.accept("a")) << "the chain matches nothing before the \"a\"";
    EXPECT_TRUE(m.can_end());
    // left recursion through the empty chain is still found
    std::string left = "root ::= x\nx ::= r0 x \"b\" | \"c\"\n";
    for (int i = 0; i < 1000; ++i) left += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    left += "r1000 ::= \"\" | \"d\"\n";
    EXPECT_THROW(parse_grammar(left, 100000), Error);
}

// Reproduced by fuzz_grammar as out-of-memory (fuzz/corpus/fuzz_grammar/crash-repeat-total-size):
// the bound on what repetition writes held per alternative only, so 150 terms "a"{1000}{1000}
// (2.4 KB of text) grew past 2 GB. It now holds for the whole grammar.
TEST(GrammarParser, RepetitionIsBoundedOverTheWholeGrammar) {
    EXPECT_NO_THROW(parse_grammar("root ::= \"a\"{1000}{1000}", 100000));
    std::string many = "root ::=";
    for (int i = 0; i < 150; ++i) many += " \"a\"{1000}{1000}";
    try {
        parse_grammar(many, 100000);
        ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("repetition too large"), std::string::npos) << e.what();
    }
}

// Random bytes as grammar text never crash or hang the parser: an error or a grammar.
TEST(GrammarParser, FuzzedTextNeverCrashes) {
    Rng rng(5);
    const std::string pieces[] = {"root", " ::= ", "\"a\"", "[",   "]", "^", "-",  "(", ")",  "|",
                                  "*",    "+",     "?",     "{2,", "}", "x", "\n", ".", "\\", "#"};
    for (int i = 0; i < 3000; ++i) {
        std::string t;
        const int n = 1 + int(rng.below(12));
        for (int k = 0; k < n; ++k) t += pieces[rng.below(std::size(pieces))];
        try {
            const Grammar g = parse_grammar(t, 2000);
            Matcher m(g);
            m.accept("aaa");
        } catch (const Error&) {}
    }
}

}   // namespace
}   // namespace kimi::grammar
