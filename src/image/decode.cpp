// decode_image: sniffs the magic bytes, dispatches to the per-format decoder and checks what it
// hands back; also the mode names and sizes of decoded_image.h and the shared limit check.
#include "image/decode.h"

#include <string>

#include "core/error.h"
#include "image/decode_internal.h"
#include "image/probe.h"

namespace kimi::image {

const char* pixel_mode_name(PixelMode m) {
    switch (m) {
        case PixelMode::k1: return "1";
        case PixelMode::kL: return "L";
        case PixelMode::kLA: return "LA";
        case PixelMode::kP: return "P";
        case PixelMode::kRGB: return "RGB";
        case PixelMode::kRGBA: return "RGBA";
        case PixelMode::kI16: return "I;16";
        case PixelMode::kCMYK: return "CMYK";
    }
    return "?";
}

int bytes_per_pixel(PixelMode m) {
    switch (m) {
        case PixelMode::k1:
        case PixelMode::kL:
        case PixelMode::kP: return 1;
        case PixelMode::kLA:
        case PixelMode::kI16: return 2;
        case PixelMode::kRGB: return 3;
        case PixelMode::kRGBA:
        case PixelMode::kCMYK: return 4;
    }
    return 0;
}

namespace {

bool starts_with(std::span<const uint8_t> bytes, size_t offset, const char* magic, size_t n) {
    if (bytes.size() < offset + n) return false;
    for (size_t i = 0; i < n; ++i)
        if (bytes[offset + i] != static_cast<uint8_t>(magic[i])) return false;
    return true;
}

}   // namespace

const char* sniff_format(std::span<const uint8_t> bytes) {
    if (starts_with(bytes, 0, "\x89PNG\r\n\x1a\n", 8)) return "png";
    if (starts_with(bytes, 0, "\xff\xd8\xff", 3)) return "jpeg";
    if (starts_with(bytes, 0, "GIF87a", 6) || starts_with(bytes, 0, "GIF89a", 6)) return "gif";
    if (starts_with(bytes, 0, "BM", 2)) return "bmp";
    // As Pillow's WebP _accept: RIFF....WEBP followed by a VP8 / VP8L / VP8X chunk.
    if (starts_with(bytes, 0, "RIFF", 4) && starts_with(bytes, 8, "WEBP", 4) &&
        (starts_with(bytes, 12, "VP8 ", 4) || starts_with(bytes, 12, "VP8L", 4) || starts_with(bytes, 12, "VP8X", 4)))
        return "webp";
    return "";
}

namespace detail {

void check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits) {
    if (width <= 0 || height <= 0)
        throw Error(std::string(format) + ": invalid image size " + std::to_string(width) + "x" +
                    std::to_string(height));
    if (width > limits.max_side || height > limits.max_side)
        throw Error(std::string(format) + ": image " + std::to_string(width) + "x" + std::to_string(height) +
                    " exceeds the maximum side of " + std::to_string(limits.max_side) + " pixels");
    // Both sides are <= max_side (an int32), so the product fits in int64.
    if (width * height > limits.max_pixels)
        throw Error(std::string(format) + ": image " + std::to_string(width) + "x" + std::to_string(height) +
                    " exceeds the limit of " + std::to_string(limits.max_pixels) + " pixels");
}

size_t pixel_bytes(int32_t width, int32_t height, PixelMode mode) {
    KIMI_CHECK(width > 0 && height > 0, "pixel_bytes: dimensions not checked");
    return static_cast<size_t>(width) * static_cast<size_t>(height) * static_cast<size_t>(bytes_per_pixel(mode));
}

}   // namespace detail

namespace detail {

DecodedImage decode_unprobed(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    if (bytes.empty()) throw Error("image: empty input");
    const std::string format = sniff_format(bytes);
    DecodedImage image;
    if (format == "png") {
        image = decode_png(bytes, limits);
    } else if (format == "jpeg") {
        image = decode_jpeg(bytes, limits);
    } else if (format == "webp") {
        image = decode_webp(bytes, limits);
    } else if (format == "gif") {
        image = decode_gif(bytes, limits);
    } else if (format == "bmp") {
        image = decode_bmp(bytes, limits);
    } else {
        throw Error("image: unrecognized format (not PNG, JPEG, WebP, GIF or BMP)");
    }
    image.format = format;
    KIMI_CHECK(image.width > 0 && image.height > 0, "decoder returned an empty image");
    KIMI_CHECK(image.pixels.size() == pixel_bytes(image.width, image.height, image.mode),
               "decoder returned a pixel buffer of the wrong size");
    KIMI_CHECK(image.mode != PixelMode::kP || image.palette.size() == 256 * 4, "palette image without a palette");
    return image;
}

}   // namespace detail

DecodedImage decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    // The header first: a size over the limits, or a header the decoder would not agree with, is
    // refused before any pixel is decoded; and what the probe promised is held to.
    const ImageHeader header = probe_image(bytes, limits);
    DecodedImage image = detail::decode_unprobed(bytes, limits);
    if (image.width != header.width || image.height != header.height || image.mode != header.mode)
        throw Error(header.format + ": decoded " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                    " " + pixel_mode_name(image.mode) + " differs from the header's " + std::to_string(header.width) +
                    "x" + std::to_string(header.height) + " " + pixel_mode_name(header.mode));
    return image;
}

}   // namespace kimi::image
