// Pillow 9.4's conversions to RGB / RGBA and the RGBa / La premultiply round trip (see
// convert.h). Per-pixel integer formulas as libImaging/Convert.c computes them.
#include "image/convert.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace kimi::image {
namespace {

// Pillow's MULDIV255: a·b/255 rounded, in integers.
uint8_t muldiv255(uint32_t a, uint32_t b) {
    const uint32_t tmp = a * b + 128;
    return static_cast<uint8_t>(((tmp >> 8) + tmp) >> 8);
}

uint8_t clip8(int64_t v) { return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v)); }

uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// The grey value of pixel i of a one-band mode, as Pillow's x2rgb turns it into 8 bits.
uint8_t grey8(const DecodedImage& img, size_t i) {
    switch (img.mode) {
        case PixelMode::k1: return img.pixels[i] != 0 ? 255 : 0;
        case PixelMode::kI16: return clip8(load_u16(&img.pixels[2 * i]));
        default: return img.pixels[i];   // kL
    }
}

size_t pixel_count(const DecodedImage& img) { return static_cast<size_t>(img.width) * static_cast<size_t>(img.height); }

}   // namespace

void check_decoded_image(const DecodedImage& img) {
    if (img.width < 1 || img.height < 1) {
        throw Error("image: empty or negative size " + std::to_string(img.width) + "x" + std::to_string(img.height));
    }
    const int bpp = bytes_per_pixel(img.mode);
    if (bpp < 1) throw Error("image: unknown pixel mode " + std::to_string(static_cast<int>(img.mode)));
    // width, height < 2^31 and bpp ≤ 4: the product fits in 64 bits.
    const uint64_t need = static_cast<uint64_t>(img.width) * static_cast<uint64_t>(img.height) * bpp;
    if (img.pixels.size() != need) {
        throw Error("image: " + std::to_string(img.pixels.size()) + " pixel bytes for " + std::to_string(img.width) +
                    "x" + std::to_string(img.height) + " (expected " + std::to_string(need) + ")");
    }
    if (img.mode == PixelMode::kP && img.palette.size() != 1024) {
        throw Error("image: a palette image needs 256 RGBA palette entries, got " + std::to_string(img.palette.size()) +
                    " bytes");
    }
}

bool has_alpha(const DecodedImage& img) {
    switch (img.mode) {
        case PixelMode::kLA:
        case PixelMode::kRGBA: return true;
        case PixelMode::kP: return img.has_transparency;
        case PixelMode::k1:
        case PixelMode::kL:
        case PixelMode::kI16: return img.has_transparency && img.transparent_value >= 0;
        default: return false;
    }
}

std::vector<uint8_t> convert_to_rgb(const DecodedImage& img) {
    check_decoded_image(img);
    const size_t n = pixel_count(img);
    std::vector<uint8_t> out(n * 3);
    const uint8_t* in = img.pixels.data();
    uint8_t* o = out.data();
    switch (img.mode) {
        case PixelMode::kRGB: std::memcpy(o, in, n * 3); break;
        case PixelMode::kRGBA:
            for (size_t i = 0; i < n; ++i) std::memcpy(o + 3 * i, in + 4 * i, 3);
            break;
        case PixelMode::kLA:
            for (size_t i = 0; i < n; ++i) o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = in[2 * i];
            break;
        case PixelMode::kP:
            for (size_t i = 0; i < n; ++i) std::memcpy(o + 3 * i, &img.palette[4 * size_t{in[i]}], 3);
            break;
        case PixelMode::kCMYK:
            for (size_t i = 0; i < n; ++i) {
                const uint8_t* p = in + 4 * i;
                const uint32_t nk = 255u - p[3];
                for (int c = 0; c < 3; ++c) o[3 * i + c] = clip8(int64_t{nk} - muldiv255(p[c], nk));
            }
            break;
        default:   // one grey band: "1", L, I;16
            for (size_t i = 0; i < n; ++i) o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = grey8(img, i);
            break;
    }
    return out;
}

std::vector<uint8_t> convert_to_rgba(const DecodedImage& img) {
    check_decoded_image(img);
    const size_t n = pixel_count(img);
    std::vector<uint8_t> out(n * 4);
    const uint8_t* in = img.pixels.data();
    uint8_t* o = out.data();
    switch (img.mode) {
        case PixelMode::kRGBA: std::memcpy(o, in, n * 4); break;
        case PixelMode::kLA:
            for (size_t i = 0; i < n; ++i) {
                o[4 * i] = o[4 * i + 1] = o[4 * i + 2] = in[2 * i];
                o[4 * i + 3] = in[2 * i + 1];
            }
            break;
        case PixelMode::kP:   // the palette carries tRNS / the GIF transparent index as alpha
            for (size_t i = 0; i < n; ++i) std::memcpy(o + 4 * i, &img.palette[4 * size_t{in[i]}], 4);
            break;
        case PixelMode::kRGB:
        case PixelMode::kCMYK: {
            const std::vector<uint8_t> rgb = convert_to_rgb(img);
            for (size_t i = 0; i < n; ++i) {
                std::memcpy(o + 4 * i, &rgb[3 * i], 3);
                o[4 * i + 3] = 255;
            }
            break;
        }
        default: {   // "1", L, I;16: convert_transparent compares r, g, b with the value's low byte
            const bool trns = has_alpha(img);
            const int32_t t = trns ? (img.transparent_value & 0xff) : -1;
            for (size_t i = 0; i < n; ++i) {
                const uint8_t g = grey8(img, i);
                o[4 * i] = o[4 * i + 1] = o[4 * i + 2] = g;
                o[4 * i + 3] = g == t ? 0 : 255;
            }
            break;
        }
    }
    return out;
}

void premultiply_alpha(std::span<uint8_t> pixels, int channels) {
    const size_t c = static_cast<size_t>(channels);
    for (size_t i = 0; i + c <= pixels.size(); i += c) {
        const uint8_t a = pixels[i + c - 1];
        for (size_t k = 0; k + 1 < c; ++k) pixels[i + k] = muldiv255(pixels[i + k], a);
    }
}

void unpremultiply_alpha(std::span<uint8_t> pixels, int channels) {
    const size_t c = static_cast<size_t>(channels);
    for (size_t i = 0; i + c <= pixels.size(); i += c) {
        const uint32_t a = pixels[i + c - 1];
        if (a == 0 || a == 255) continue;
        for (size_t k = 0; k + 1 < c; ++k) pixels[i + k] = clip8((255u * pixels[i + k]) / a);
    }
}

}   // namespace kimi::image
