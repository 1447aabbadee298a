// image_key: SHA-256 over an image as the tower sees it (see image_key.h).
#include "image/image_key.h"

#include <openssl/evp.h>

#include <cstring>
#include <vector>

#include "core/error.h"

namespace kimi::image {

uint64_t ImageKey::word(int i) const {
    uint64_t w = 0;
    for (int b = 7; b >= 0; --b) w = (w << 8) | digest[size_t(8 * i + b)];
    return w;
}

std::string ImageKey::hex() const {
    static const char* digits = "0123456789abcdef";
    std::string s;
    s.reserve(64);
    for (uint8_t b : digest) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

namespace {

// The fields in a fixed little-endian layout, so the key does not depend on struct padding.
void put(std::vector<uint8_t>& out, uint64_t v) {
    for (int b = 0; b < 8; ++b) out.push_back(uint8_t(v >> (8 * b)));
}
void put_f64(std::vector<uint8_t>& out, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put(out, bits);
}
void put_str(std::vector<uint8_t>& out, const std::string& s) {
    put(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

}   // namespace

ImageKey image_key(const PreparedImage& img, const MediaConfig& c) {
    std::vector<uint8_t> head;
    head.reserve(512);
    put_str(head, "kimi.cpp image key v1");
    const ImageGeometry& g = img.geom;
    for (int64_t v : {int64_t(g.width), int64_t(g.height), int64_t(g.new_width), int64_t(g.new_height),
                      int64_t(g.pad_width), int64_t(g.pad_height), int64_t(g.grid_h), int64_t(g.grid_w), g.n_tokens})
        put(head, uint64_t(v));
    for (int64_t v :
         {int64_t(c.patch_size), int64_t(c.merge_kernel_size), c.in_patch_limit, int64_t(c.patch_limit_on_one_side),
          int64_t(c.has_transparent_bg), int64_t(c.chessboard_square_size), int64_t(c.chessboard_square_on_top_left),
          int64_t(c.chessboard_white_value), int64_t(c.chessboard_gray_value), int64_t(c.fill_after_resize)})
        put(head, uint64_t(v));
    for (int k = 0; k < 3; ++k) {
        put_f64(head, double(c.image_mean[k]));
        put_f64(head, double(c.image_std[k]));
        put_f64(head, c.image_std_exact[k]);
    }
    put_str(head, c.bg_pattern);
    put(head, img.rgb.size());

    ImageKey key;
    unsigned int n = 0;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    const bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
        EVP_DigestUpdate(ctx, head.data(), head.size()) == 1 &&
        EVP_DigestUpdate(ctx, img.rgb.data(), img.rgb.size()) == 1 &&
        EVP_DigestFinal_ex(ctx, key.digest.data(), &n) == 1 && n == key.digest.size();
    EVP_MD_CTX_free(ctx);
    if (!ok) throw Error("image key: SHA-256 (libcrypto) failed");
    return key;
}

}   // namespace kimi::image
