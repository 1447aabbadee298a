// log_text (src/server/log_text.h): what a client sent, as one safe log line. Issue 56: a
// percent-decoded path with %0a wrote a second, forged "access:" line; %0d, ANSI escapes (%1b)
// and fake "error:" lines got through too.
#include <gtest/gtest.h>

#include <string>

#include "server/log_text.h"

namespace kimi::server {
namespace {

TEST(LogText, NoByteStartsALineOrMovesTheCursor) {
    EXPECT_EQ(log_text("/v1/models"), "/v1/models");
    EXPECT_EQ(log_text("/nope\naccess: 2026 GET /forged 200"), "/nope\\naccess: 2026 GET /forged 200");
    EXPECT_EQ(log_text("a\rb\tc"), "a\\rb\\tc");
    EXPECT_EQ(log_text("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
    EXPECT_EQ(log_text(std::string("nul\0x", 5)), "nul\\x00x");
    EXPECT_EQ(log_text("del\x7f"), "del\\x7f");
    EXPECT_EQ(log_text("back\\slash"), "back\\\\slash") << "a literal \\n in the text stays tellable from an escape";
    // UTF-8 text is kept; C1 controls (U+009B is a one-byte CSI to some terminals), stray or
    // overlong bytes and surrogates are escaped
    EXPECT_EQ(log_text("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
    EXPECT_EQ(log_text("\xc2\x9b"
                       "2J"),
              "\\xc2\\x9b2J");
    EXPECT_EQ(log_text("\xff\xfe"), "\\xff\\xfe");
    EXPECT_EQ(log_text("\xc0\xaf"), "\\xc0\\xaf");
    EXPECT_EQ(log_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");
    EXPECT_EQ(log_text("\xe6\x97"), "\\xe6\\x97") << "a sequence cut short";
    for (int c = 0; c < 256; ++c) {   // no raw control byte ever comes out
        const std::string out = log_text(std::string(4, char(c)));
        for (const char o : out) EXPECT_FALSE(uint8_t(o) < 0x20 || uint8_t(o) == 0x7f) << c;
    }
}

TEST(LogText, CutAtItsLimit) {
    EXPECT_EQ(log_text(std::string(300, 'a'), 200), std::string(200, 'a') + "…");
    EXPECT_EQ(log_text("\xe6\x97\xa5\xe6\x97\xa5", 4), "\xe6\x97\xa5\\xe6…") << "a character cut by the limit";
}

}   // namespace
}   // namespace kimi::server
