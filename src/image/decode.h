// decode_image: PNG, JPEG, WebP, GIF (first frame) and BMP bytes → DecodedImage, in the mode
// Pillow would open the file in, with JPEG EXIF orientation applied. Everything a client can
// send is checked: unknown, corrupt, truncated or oversized input is a kimi::Error with a
// one-line message, never a crash. ref: docs/vision.md#pixels.
#pragma once
#include <cstdint>
#include <span>

#include "image/decoded_image.h"

namespace kimi::image {

struct DecodeLimits {
    int64_t max_pixels = 89478485;   // width × height (Pillow's decompression-bomb threshold)
    int32_t max_side = 65500;
};

DecodedImage decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

// The format the magic bytes name ("png", "jpeg", "webp", "gif", "bmp"), or "" when none.
const char* sniff_format(std::span<const uint8_t> bytes);

}   // namespace kimi::image
