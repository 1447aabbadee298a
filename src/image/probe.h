// probe_image: an image's size, mode and a bound of the memory its decoding takes, read from the
// headers and chunk tables only (no pixel is decoded, nothing proportional to the image is
// allocated), so that a server can refuse an image before decoding it. decode_image probes
// first and refuses a decoded size that differs from the probed one; for any input that
// probe_image accepts, decode_image either throws kimi::Error or returns an image of exactly
// the probed size whose decoding peaked at no more than `decode_bytes` of heap (the C
// libraries' own mallocs included), and prepare_image of that image takes at most
// prepare_bytes(header, config) more. ref: docs/vision.md#probe.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "image/decode.h"
#include "image/decoded_image.h"
#include "image/preprocess.h"

namespace kimi::image {

struct ImageHeader {
    std::string format;                  // "png", "jpeg", "webp", "gif", "bmp" (as sniff_format)
    int32_t width = 0, height = 0;       // exactly what decode_image returns (JPEG: after the EXIF orientation;
                                         // GIF: the logical screen, grown to hold the first frame as Pillow does)
    int64_t decode_bytes = 0;            // upper bound of the peak heap bytes decode_image(bytes) uses
    PixelMode mode = PixelMode::kRGBA;   // the mode decode_image returns (prepare_bytes depends on it)
    int orientation = 1;                 // JPEG: the EXIF orientation applied (1..8); 1 otherwise
    bool transparency = true;            // modes P / 1 / L / I;16: a transparent index or grey value may be set
                                         // (the image then goes through RGBA); false when the header rules it out
};

// Reads only headers and chunk tables; throws kimi::Error (a one-line message starting with the
// format, like the decoders) for unknown, corrupt or truncated headers and for sizes over `limits`.
ImageHeader probe_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

// An upper bound of the peak heap bytes prepare_image(decoded, c) uses beyond its input (its
// result included), for an image of that header's size and mode.
int64_t prepare_bytes(const ImageHeader& h, const MediaConfig& c);

}   // namespace kimi::image
