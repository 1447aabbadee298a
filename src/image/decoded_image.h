// DecodedImage: an image as a decoder hands it over, in the pixel modes Pillow opens files in
// (the preprocessing mirrors Pillow, so the mode decides what happens next: palette images
// resize by nearest neighbour, RGBA/LA resize premultiplied, ...). ref: docs/vision.md#pixels.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kimi::image {

// Pillow's modes, as far as the decoders produce them.
enum class PixelMode : uint8_t {
    k1,      // bilevel: one byte per pixel, 0 or 255 (as Pillow stores mode "1")
    kL,      // 8-bit grey
    kLA,     // 8-bit grey + alpha
    kP,      // 8-bit palette index (palette: 256 RGBA entries)
    kRGB,    // 3 bytes per pixel
    kRGBA,   // 4 bytes per pixel (straight, not premultiplied, alpha)
    kI16,    // 16-bit grey, one native-endian uint16 per pixel (Pillow 9.4 opens such PNGs as "I")
    kCMYK,   // 4 bytes per pixel (Pillow "CMYK", already un-inverted)
};

const char* pixel_mode_name(PixelMode m);   // Pillow's name: "1", "L", "LA", "P", "RGB", "RGBA", "I;16", "CMYK"
int bytes_per_pixel(PixelMode m);

struct DecodedImage {
    int32_t width = 0, height = 0;
    PixelMode mode = PixelMode::kRGB;
    std::vector<uint8_t> pixels;   // [height, width, bytes_per_pixel(mode)] row-major, interleaved
    // kP: 256 entries of R, G, B, A (A from tRNS / the GIF transparent index, else 255).
    std::vector<uint8_t> palette;
    // Pillow's info["transparency"]: kP: some palette alpha is < 255; kL / kI16: the grey value
    // `transparent_value` is transparent (tRNS). RGB tRNS is not recorded (the pipeline ignores it).
    bool has_transparency = false;
    int32_t transparent_value = -1;
    std::string format;   // "png", "jpeg", "webp", "gif", "bmp"
};

}   // namespace kimi::image
