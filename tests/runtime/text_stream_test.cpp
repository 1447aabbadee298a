// TextStream: streamed text equals the lossy decode, pieces end at character boundaries,
// and a stop string — wherever it falls across token boundaries — cuts the text just
// before it, with nothing of it ever shown first. Synthetic tokenizer, no model.
#include <gtest/gtest.h>

#include "runtime/text_stream.h"
#include "test_models.h"
#include "tokenizer/synthetic.h"

namespace kimi {
namespace {

const tok::Tokenizer& tokenizer() {
    static const tok::Tokenizer t = [] {
        const std::string dir = test::temp_dir("tok");
        tok::write_synthetic_tokenizer(dir, 1024, 5);
        return tok::Tokenizer::load(dir);
    }();
    return t;
}

bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

struct Streamed {
    std::string text;
    int stopped_at = -1;   // index of the token whose push returned true
    std::vector<std::string> pieces;
};

Streamed stream(const std::vector<int32_t>& ids, const std::vector<std::string>& stops, bool skip_special = true) {
    TextStream ts(tokenizer(), stops, skip_special);
    Streamed r;
    for (size_t i = 0; i < ids.size(); ++i) {
        std::string piece;
        const bool hit = ts.push(ids[i], piece);
        r.pieces.push_back(piece);
        r.text += piece;
        if (hit) {
            r.stopped_at = int(i);
            return r;
        }
    }
    std::string rest;
    ts.finish(rest);
    r.pieces.push_back(rest);
    r.text += rest;
    return r;
}

const char* kText =
    "Hello, world! 世界你好 — the END is near; naïve café 🙂👍🏽 tokens:::end. Второй abc";

TEST(TextStream, NoStopsEqualsDecodeAndPiecesAreWholeCharacters) {
    const auto ids = tokenizer().encode(kText);
    ASSERT_GT(ids.size(), 20u);
    const Streamed r = stream(ids, {});
    EXPECT_EQ(r.text, kText);
    for (const auto& p : r.pieces) EXPECT_TRUE(valid_utf8(p)) << p;
}

// Every substring of the text (length 1..7) as the stop string.
TEST(TextStream, StopStringAnywhereCutsJustBeforeIt) {
    const std::string text = kText;
    const auto ids = tokenizer().encode(text);
    // Byte offset where each token's text ends.
    std::vector<size_t> ends;
    size_t acc = 0;
    for (int32_t id : ids) ends.push_back(acc += tokenizer().token_bytes(id).size());
    int checked = 0, spanning = 0;
    for (size_t start = 0; start < text.size(); ++start) {
        for (size_t len = 1; len <= 7 && start + len <= text.size(); ++len) {
            const std::string stop = text.substr(start, len);
            if (!valid_utf8(stop)) continue;
            const size_t first = text.find(stop);
            const Streamed r = stream(ids, {stop, "\x01never"});
            ASSERT_EQ(r.text, text.substr(0, first)) << "stop '" << stop << "'";
            // It fires on the token that completes the first occurrence.
            const size_t done = first + stop.size();
            const int expect_at = int(std::lower_bound(ends.begin(), ends.end(), done) - ends.begin());
            ASSERT_EQ(r.stopped_at, expect_at) << "stop '" << stop << "'";
            std::string shown;
            for (const auto& p : r.pieces) {
                shown += p;
                EXPECT_EQ(shown.find(stop), std::string::npos);
                EXPECT_TRUE(valid_utf8(p));
            }
            ++checked;
            const int begin_tok = int(std::upper_bound(ends.begin(), ends.end(), first) - ends.begin());
            spanning += begin_tok != expect_at;
        }
    }
    EXPECT_GT(checked, 300);
    EXPECT_GT(spanning, 50);   // many stops straddle token boundaries
}

TEST(TextStream, EarliestOfSeveralStopsWins) {
    const auto ids = tokenizer().encode(kText);
    TextStream ts(tokenizer(), {"near", "END", "world"}, true);
    std::string out;
    size_t i = 0;
    while (i < ids.size() && !ts.push(ids[i], out)) ++i;
    EXPECT_EQ(out, "Hello, ");
    EXPECT_EQ(ts.stop_index(), 2);
}

TEST(TextStream, IncludeStopStringKeepsIt) {
    const auto ids = tokenizer().encode(kText);
    TextStream ts(tokenizer(), {"END"}, true, true);
    std::string out;
    for (size_t i = 0; i < ids.size() && !ts.push(ids[i], out); ++i) {}
    EXPECT_EQ(out, "Hello, world! 世界你好 — the END");
}

TEST(TextStream, SpecialTokensAreSkippedUnlessAsked) {
    const auto& t = tokenizer();
    const int32_t im_end = *t.special_id("<|im_end|>");
    std::vector<int32_t> ids = t.encode("abc");
    ids.push_back(im_end);
    const auto tail = t.encode(" def");
    ids.insert(ids.end(), tail.begin(), tail.end());
    EXPECT_EQ(stream(ids, {}).text, "abc def");
    EXPECT_EQ(stream(ids, {}, false).text, "abc<|im_end|> def");
    // A stop string never matches across a skipped special token's text.
    EXPECT_EQ(stream(ids, {"c<|im"}).text, "abc def");
}

TEST(TextStream, InvalidBytesBecomeReplacementOnFinish) {
    // A lone lead byte of a 3-byte character: held back while it could complete, then U+FFFD.
    const Streamed r = stream({int32_t(0xE4), int32_t('a')}, {});
    EXPECT_EQ(r.text,
              "\xEF\xBF\xBD"
              "a");
}

}   // namespace
}   // namespace kimi
