// Private to the decoders (src/image/decode*.cpp, exif.cpp): the per-format entry points that
// decode_image dispatches to, the shared limit check and the EXIF orientation helpers.
#pragma once
#include <cstdint>
#include <span>

#include "image/decode.h"
#include "image/decoded_image.h"

namespace kimi::image::detail {

// Throws kimi::Error("<format>: ...") unless 0 < width, height <= max_side and
// width × height <= max_pixels. Call it before allocating anything proportional to the image.
void check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits);

// width × height × bytes_per_pixel(mode) as a size_t, for dimensions that passed check_dimensions.
size_t pixel_bytes(int32_t width, int32_t height, PixelMode mode);

DecodedImage decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_gif(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_bmp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// The EXIF orientation (1..8) in a JPEG APP1 payload ("Exif\0\0" + TIFF), as Pillow's
// getexif()[0x0112] would read it from IFD0; 1 when the payload has none or is malformed.
int exif_orientation(std::span<const uint8_t> app1_payload);

// Applies orientation 2..8 the way PIL.ImageOps.exif_transpose does (1 and others: no change).
void apply_orientation(DecodedImage& image, int orientation);

}   // namespace kimi::image::detail
