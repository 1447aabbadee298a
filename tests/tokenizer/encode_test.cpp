// Encoding: the pre-tokenizer's splits on the reference examples (Python `regex` V1 results
// quoted in the docs), the byte-pair merge against a naive re-implementation of tiktoken's
// rule, the Python wrapper's 25,000 / 400,000 cuts, special-token handling, and a bounded fuzz
// loop over arbitrary bytes (no crash, exact round trip).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"
#include "test_util.h"

namespace kimi::tok::test {
namespace {

std::vector<std::string> split(const std::string& s, Pattern p = Pattern::kimi) {
    std::vector<std::string> out;
    Splitter sp(s, p);
    std::string_view piece;
    while (sp.next(piece)) out.emplace_back(piece);
    return out;
}

using V = std::vector<std::string>;

TEST(Pretokenize, ReferenceSplits) {
    EXPECT_EQ(split("helloWorld"), (V{"hello", "World"}));
    EXPECT_EQ(split("iPhone"), (V{"i", "Phone"}));
    EXPECT_EQ(split("getUserName"), (V{"get", "User", "Name"}));
    EXPECT_EQ(split("HTTPServer"), (V{"HTTPServer"}));
    EXPECT_EQ(split("中文English混合"), (V{"中文", "English", "混合"}));
    EXPECT_EQ(split("I'M here, we'll go"), (V{"I'M", " here", ",", " we'll", " go"}));
    EXPECT_EQ(split("123456789"), (V{"123", "456", "789"}));
    EXPECT_EQ(split("  leading\n\n  x"), (V{" ", " leading", "\n\n", " ", " x"}));
    EXPECT_EQ(split("tab\tsep"), (V{"tab", "\tsep"}));
    EXPECT_EQ(split("々〇𠀀abc"), (V{"々〇𠀀", "abc"}));
}

TEST(Pretokenize, PatternDetails) {
    // The o200k pattern has no Han alternative and keeps '/' after punctuation.
    EXPECT_EQ(split("中文English", Pattern::o200k), (V{"中文English"}));
    EXPECT_EQ(split("!/\n/x", Pattern::kimi), (V{"!/\n", "/x"}));
    EXPECT_EQ(split("!\n/x", Pattern::o200k), (V{"!\n/", "x"}));
    EXPECT_EQ(split("!\n/x", Pattern::kimi), (V{"!\n", "/x"}));
    EXPECT_EQ(split("a  \n b"), (V{"a", "  \n", " b"}));
    EXPECT_EQ(split("x   "), (V{"x", "   "}));
    EXPECT_EQ(split("x   y"), (V{"x", "  ", " y"}));
    EXPECT_EQ(split("x'ſ"), (V{"x'ſ"}));                   // long s case-folds to s in (?i:'s)
    EXPECT_EQ(split("don’t"), (V{"don", "’t"}));           // U+2019 is not an apostrophe here
    EXPECT_EQ(split("e\xCC\x81te"), (V{"e\xCC\x81te"}));   // combining mark inside a word
    EXPECT_EQ(split("\xCC\x81"
                    "A"),
              (V{"\xCC\x81", "A"}));   // B+ = the mark alone (alt 2 before alt 3)
    EXPECT_EQ(split("\xFF"
                    "ab"),
              (V{"\xFF"
                 "ab"}));   // an invalid byte is a single punctuation-like character
    EXPECT_EQ(split(""), V{});
}

TEST(Unicode, AsciiTableMatchesGenerated) {
    for (uint32_t c = 0; c < 128; ++c) {
        uint8_t want = cp_class_slow(c);
        EXPECT_EQ(kAsciiClass[c], want) << c;
    }
    EXPECT_TRUE(cp_class(0x4E2D) & kHan);
    EXPECT_FALSE(cp_class(0x3001) & kHan);   // 、 is Han only by Script_Extensions
    EXPECT_TRUE(cp_class(0x0085) & kSpace);
    EXPECT_FALSE(cp_class(0xFEFF) & kSpace);
    EXPECT_FALSE(cp_class(0x180E) & kSpace);
    EXPECT_TRUE(cp_class(0x1C89) & kLetter);   // added in Unicode 16
    EXPECT_EQ(std::string(kUnicodeVersion), "16.0.0");
}

// tiktoken's merge written naively: keep the parts as byte strings, repeatedly join the
// leftmost adjacent pair whose concatenation has the lowest rank.
std::vector<int32_t> naive_merge(const std::string& piece, const std::map<std::string, int32_t>& ranks) {
    std::vector<std::string> parts;
    for (char c : piece) parts.emplace_back(1, c);
    for (;;) {
        int32_t best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < parts.size(); ++i) {
            auto it = ranks.find(parts[i] + parts[i + 1]);
            if (it != ranks.end() && (best < 0 || it->second < best)) {
                best = it->second;
                bi = i;
            }
        }
        if (best < 0) break;
        parts[bi] += parts[bi + 1];
        parts.erase(parts.begin() + long(bi) + 1);
    }
    std::vector<int32_t> out;
    for (const auto& p : parts) out.push_back(ranks.at(p));
    return out;
}

TEST(Bpe, MatchesNaiveMergeOnRandomVocabularies) {
    std::mt19937_64 rng(42);
    for (int round = 0; round < 20; ++round) {
        // Alphabet of 4 letters so that merges interact a lot; random merged tokens.
        RankTable table;
        std::map<std::string, int32_t> ranks;
        for (int b = 0; b < 256; ++b) {
            table.insert(std::string(1, char(b)), uint32_t(b));
            ranks[std::string(1, char(b))] = b;
        }
        std::vector<std::string> toks = {"a", "b", "c", "d"};
        for (int k = 0; k < 60; ++k) {
            const std::string t = toks[rng() % toks.size()] + toks[rng() % toks.size()];
            if (ranks.count(t)) continue;
            const auto r = int32_t(ranks.size());
            ranks[t] = r;
            table.insert(t, uint32_t(r));
            toks.push_back(t);
        }
        for (int k = 0; k < 200; ++k) {
            std::string piece;
            const size_t len = 1 + rng() % (k % 4 == 0 ? 400 : 70);   // both the short and the heap path
            for (size_t i = 0; i < len; ++i) piece += char('a' + rng() % 4);
            std::vector<int32_t> got;
            bpe_merge(piece, table, got);
            ASSERT_EQ(got, naive_merge(piece, ranks)) << "piece " << piece;
        }
    }
}

TEST(Encode, LongRunsAreCutLikeThePythonWrapper) {
    const Tokenizer& t = synthetic();
    // 25,001 same-class characters: one cut before the last one.
    const std::string a25k(25000, 'a');
    auto cat = [](std::vector<int32_t> x, const std::vector<int32_t>& y) {
        x.insert(x.end(), y.begin(), y.end());
        return x;
    };
    EXPECT_EQ(t.encode(a25k + "a"), cat(t.encode(a25k), t.encode("a")));
    EXPECT_EQ(t.encode(std::string(25001, ' ') + "x"), cat(t.encode(std::string(25000, ' ')), t.encode(" x")));
    // Counted in code points, not bytes: 25,001 three-byte characters.
    std::string han;
    for (int i = 0; i < 25001; ++i) han += "中";
    EXPECT_EQ(t.encode(han), cat(t.encode(han.substr(0, 75000)), t.encode("中")));
    // A special token cut by the 25,000 run limit is plain text.
    const int32_t im_end = *t.special_id("<|im_end|>");
    const auto cut = t.encode(std::string(24995, 'x') + "<|im_end|>");
    EXPECT_EQ(std::count(cut.begin(), cut.end(), im_end), 0);
    const auto whole = t.encode(std::string(24990, 'x') + "<|im_end|>");
    EXPECT_EQ(std::count(whole.begin(), whole.end(), im_end), 1);
    // The 400,000-character window splits a special token too.
    std::string w;
    for (int i = 0; i < 133333; ++i) w += "ab ";
    const auto win = t.encode(w + "<|im_end|>");
    EXPECT_EQ(std::count(win.begin(), win.end(), im_end), 0);
    const auto win2 = t.encode(w.substr(10) + "<|im_end|>");
    EXPECT_EQ(std::count(win2.begin(), win2.end(), im_end), 1);
    EXPECT_EQ(t.decode(win), w + "<|im_end|>");
}

TEST(Encode, SpecialTokens) {
    const Tokenizer& t = synthetic();
    const int32_t bos = t.bos_id(), im_end = *t.special_id("<|im_end|>");
    EXPECT_EQ(t.encode("[BOS]"), (std::vector<int32_t>{bos}));
    EXPECT_EQ(t.encode("<|im_end|><|im_end|>"), (std::vector<int32_t>{im_end, im_end}));
    const auto none = t.encode("<|im_end|>", false);
    EXPECT_GT(none.size(), 1u);
    EXPECT_EQ(t.decode(none), "<|im_end|>");
    const int32_t reserved = t.n_base() + 5;
    EXPECT_EQ(t.encode("x<|reserved_token_" + std::to_string(reserved) + "|>y").at(1), reserved);
    EXPECT_EQ(t.encode("<|im_end|").size(), t.encode("<|im_end|", false).size());
    EXPECT_TRUE(t.encode("").empty());
}

TEST(Encode, FuzzArbitraryBytes) {
    const Tokenizer& t = synthetic();
    std::mt19937_64 rng(1234);
    const std::vector<std::string> pieces = {
        "a",  "Z",    " ",        "\n",       "\r",           "'",        "s",          "1",
        "中", "é",    "\xCC\x81", "😀",        "\xE2\x80\x8B", "\xC2\x85", "<|im_end|>", "[BOS]",
        "<|", "\xFF", "\xC3",     "\xE4\xB8", "\xED\xA0\x80"};
    for (int iter = 0; iter < 4000; ++iter) {
        std::string s;
        const size_t len = rng() % 200;
        for (size_t i = 0; i < len; ++i) {
            if (rng() % 3 == 0)
                s += char(rng() % 256);
            else
                s += pieces[rng() % pieces.size()];
        }
        for (bool special : {true, false}) {
            const auto ids = t.encode(s, special);
            for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < t.n_vocab());
            ASSERT_EQ(t.decode(ids), s);   // exact, even for invalid UTF-8
            if (utf8_valid(s)) {
                ASSERT_EQ(t.decode_lossy(ids), s);
                Tokenizer::StreamDecoder sd(t);
                std::string joined;
                for (int32_t id : ids) {
                    const std::string p = sd.push(id);
                    ASSERT_TRUE(utf8_valid(p));
                    joined += p;
                }
                joined += sd.flush();
                ASSERT_EQ(joined, s);
            }
        }
    }
}

}   // namespace
}   // namespace kimi::tok::test
