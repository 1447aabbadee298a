// ImageKey: the name of a prepared image in the encoder and prefix caches, SHA-256 (OpenSSL's
// libcrypto) over the decoded pixels as prepared, their sizes and the preprocessing settings
// that turn them into patches. Two images share a key only if they give the tower the same
// input: a client cannot make one image stand for another (the hash it replaced was a fast mix
// whose steps could be inverted, so one 8-byte word of pixels forced any key).
// ref: docs/reliability.md#images.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "image/preprocess.h"

namespace kimi::image {

struct ImageKey {
    std::array<uint8_t, 32> digest{};

    bool operator==(const ImageKey&) const = default;
    uint64_t word(int i) const;   // bytes [8i, 8i + 8) little-endian, i in 0..3
    std::string hex() const;
};

struct ImageKeyHash {   // for unordered containers: the digest is already uniform
    size_t operator()(const ImageKey& k) const { return size_t(k.word(0)); }
};

// SHA-256 of a domain tag, the geometry (sizes before and after the resize, the padding, the
// patch grid), every MediaConfig field that shapes the patches (patch and merge sizes, limits,
// mean and std, the transparent background) and the prepared RGB pixels.
ImageKey image_key(const PreparedImage& img, const MediaConfig& c);

}   // namespace kimi::image
