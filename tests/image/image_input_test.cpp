// bytes_from_url (src/image/image_input.h): data: URLs as careless clients write them (scheme and
// media type in any case, base64 wrapped, URL-safe or unpadded) are taken, invalid base64 is not;
// file:// URLs are confined to the allowed folder by path components (a file named "..x.png"
// inside is in, "../" and a symlink out are not) and may not smuggle a NUL or control character.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base64.h"
#include "core/error.h"
#include "image/image_input.h"

namespace kimi::image {
namespace {

namespace fs = std::filesystem;

const std::string kBytes = "\x89PNG\r\n\x1a\n not really a png, but bytes all the same \xff\xfe";

std::vector<uint8_t> as_vec(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// The reason bytes_from_url gives, or "" when it returns.
std::string refusal(const std::string& url, const SourcePolicy& policy) {
    try {
        bytes_from_url(url, policy);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(BytesFromUrl, DataUrlVariants) {
    const SourcePolicy policy;
    const std::string b64 = base64_encode(kBytes);
    std::string wrapped_lf, wrapped_crlf, url_safe = b64, unpadded = b64;
    for (size_t i = 0; i < b64.size(); i += 76) {
        wrapped_lf += b64.substr(i, 76) + "\n";
        wrapped_crlf += b64.substr(i, 76) + "\r\n";
    }
    for (char& c : url_safe) c = c == '+' ? '-' : c == '/' ? '_' : c;
    while (unpadded.back() == '=') unpadded.pop_back();
    for (const std::string& url :
         {"data:image/png;base64," + b64, "DATA:image/png;base64," + b64, "Data:Image/PNG;BASE64," + b64,
          "data:image/png;Base64," + b64, "data:;base64," + b64, "data:image/png;base64," + wrapped_lf,
          "data:image/png;base64," + wrapped_crlf, "data:image/png;base64," + url_safe,
          "data:image/png;base64," + unpadded})
        EXPECT_EQ(bytes_from_url(url, policy), as_vec(kBytes)) << url;
    EXPECT_NE(refusal("data:image/png;base64,@@@@", policy).find("base64 is invalid"), std::string::npos);
    EXPECT_NE(refusal("data:image/png;base64,YW Jj.", policy).find("base64 is invalid"), std::string::npos);
    EXPECT_NE(refusal("data:text/plain;base64," + b64, policy).find("is not an image"), std::string::npos);
    EXPECT_NE(refusal("data:image/png," + b64, policy).find("must be base64"), std::string::npos);
    SourcePolicy small;
    small.max_bytes = kBytes.size() - 1;
    EXPECT_NE(refusal("data:image/png;base64," + wrapped_crlf, small).find("larger than the limit"), std::string::npos);
    small.max_bytes = kBytes.size();
    EXPECT_EQ(bytes_from_url("data:image/png;base64," + wrapped_crlf, small), as_vec(kBytes));
}

class FileUrl : public ::testing::Test {
protected:
    void SetUp() override {
        base_ = fs::temp_directory_path() / ("kimi-image-input-test-" + std::to_string(::getpid()));
        fs::remove_all(base_);
        fs::create_directories(base_ / "media" / "sub");
        fs::create_directories(base_ / "secret");
        write(base_ / "media" / "ok.png", kBytes);
        write(base_ / "media" / "..x.png", kBytes);
        write(base_ / "media" / "sub" / "in.png", kBytes);
        write(base_ / "secret" / "x.png", "secret");
        fs::create_symlink(base_ / "secret" / "x.png", base_ / "media" / "link.png");
        policy_.allowed_local_media_path = (base_ / "media").string();
    }
    void TearDown() override { fs::remove_all(base_); }
    static void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
    std::string url(const std::string& rel) const { return "file://" + (base_ / "media").string() + "/" + rel; }

    fs::path base_;
    SourcePolicy policy_;
};

TEST_F(FileUrl, InsideTaken) {
    EXPECT_EQ(bytes_from_url(url("ok.png"), policy_), as_vec(kBytes));
    EXPECT_EQ(bytes_from_url(url("..x.png"), policy_), as_vec(kBytes));   // a name, not a parent
    EXPECT_EQ(bytes_from_url(url("%2E%2Ex.png"), policy_), as_vec(kBytes));
    EXPECT_EQ(bytes_from_url(url("sub/../ok.png"), policy_), as_vec(kBytes));
    EXPECT_EQ(bytes_from_url(url("sub/in.png"), policy_), as_vec(kBytes));
    EXPECT_EQ(bytes_from_url("FILE://" + (base_ / "media" / "ok.png").string(), policy_), as_vec(kBytes));
    EXPECT_EQ(bytes_from_url("file://localhost" + (base_ / "media" / "ok.png").string(), policy_), as_vec(kBytes));
}

TEST_F(FileUrl, OutsideRefused) {
    for (const std::string& u : {url("../secret/x.png"), url("%2E%2E/secret/x.png"), url("sub/../../secret/x.png"),
                                 url("link.png"), std::string("file:///etc/hostname"), url("..")})
        EXPECT_NE(refusal(u, policy_).find("outside the allowed local media path"), std::string::npos) << u;
}

TEST_F(FileUrl, ControlCharactersRefused) {
    for (const std::string& u : {url("ok.png%00/../x.png"), url("ok.png%00"), url("ok%0a.png"), url("ok%1F.png"),
                                 url("ok%7f.png"), url("ok.png\t")})
        EXPECT_NE(refusal(u, policy_).find("control character"), std::string::npos) << u;
}

TEST_F(FileUrl, RefusedWithoutAllowedPath) {
    EXPECT_NE(refusal(url("ok.png"), SourcePolicy{}).find("--allowed-local-media-path"), std::string::npos);
    EXPECT_NE(refusal("HTTPS://example.com/x.png", policy_).find("does not fetch URLs"), std::string::npos);
}

}   // namespace
}   // namespace kimi::image
