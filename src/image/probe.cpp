// probe_image: dispatches on the magic bytes to the per-format probes (next to each decoder, in
// decode_<format>.cpp, so that a header is read the same way by both); prepare_bytes: the
// memory of prepare_image, phase by phase, from the sizes image_geometry gives.
#include "image/probe.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "image/decode_internal.h"

namespace kimi::image {

ImageHeader probe_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    if (bytes.empty()) throw Error("image: empty input");
    const std::string format = sniff_format(bytes);
    ImageHeader h;
    if (format == "png") {
        h = detail::probe_png(bytes, limits);
    } else if (format == "jpeg") {
        h = detail::probe_jpeg(bytes, limits);
    } else if (format == "webp") {
        h = detail::probe_webp(bytes, limits);
    } else if (format == "gif") {
        h = detail::probe_gif(bytes, limits);
    } else if (format == "bmp") {
        h = detail::probe_bmp(bytes, limits);
    } else {
        throw Error("image: unrecognized format (not PNG, JPEG, WebP, GIF or BMP)");
    }
    h.format = format;
    detail::check_dimensions(format.c_str(), h.width, h.height, limits);
    KIMI_CHECK(h.decode_bytes > 0, "probe without a memory bound");
    return h;
}

namespace {

// resample.cpp's precompute_coeffs: the filter window of one axis (in → out samples).
int64_t window(int64_t in, int64_t out) {
    const double scale = static_cast<double>(static_cast<float>(in)) / static_cast<double>(out);
    const double support = 2.0 * (scale < 1.0 ? 1.0 : scale);
    return static_cast<int64_t>(std::ceil(support)) * 2 + 1;
}

// Bytes of one axis' coefficients: first/count (int32) and the double weights; `fixed` adds the
// int32 fixed-point copy.
int64_t coeff_bytes(int64_t in, int64_t out, bool fixed) { return out * 8 + out * window(in, out) * (fixed ? 12 : 8); }

// resize_bicubic_u8 / resize_bicubic_i32 of a w × h image of `ch` elements of `elem` bytes → nw × nh:
// everything they hold at once, at most (the input excluded).
int64_t bicubic_bytes(int64_t w, int64_t h, int64_t ch, int64_t elem, int64_t nw, int64_t nh) {
    const bool u8 = elem == 1;
    int64_t bytes = coeff_bytes(h, nh, u8);                              // the vertical plan (and its fixed-point copy)
    if (nw != w) bytes += coeff_bytes(w, nw, u8) + nw * h * ch * elem;   // horizontal pass → tmp (≤ h rows)
    if (nh != h) bytes += nw * nh * ch * elem + nw * ch * 8;             // vertical pass → out, accumulators
    if (nw == w && nh == h) bytes += w * h * ch * elem;                  // a copy
    return bytes;
}

// resize_image of a w × h image in mode m → nw × nh, its result included.
int64_t resize_bytes(int64_t w, int64_t h, PixelMode m, int64_t nw, int64_t nh) {
    const int64_t p = w * h, n = nw * nh;
    int64_t bytes = 1024;   // the palette copy
    switch (m) {
        case PixelMode::k1:
        case PixelMode::kP: return bytes + nw * 4 + n;
        case PixelMode::kLA:
        case PixelMode::kRGBA: {
            const int64_t ch = m == PixelMode::kLA ? 2 : 4;
            return bytes + p * ch + bicubic_bytes(w, h, ch, 1, nw, nh);   // the premultiplied copy, the resize
        }
        case PixelMode::kI16:   // widened to int32, resized, clipped into a new L buffer
            return bytes + p * 4 + bicubic_bytes(w, h, 1, 4, nw, nh) + n;
        default: return bytes + bicubic_bytes(w, h, bytes_per_pixel(m), 1, nw, nh);
    }
}

// to_rgb of an n-pixel image in mode m: convert_to_rgba + composite (an alpha band, or a
// transparent index / grey value), or convert_to_rgb.
int64_t to_rgb_bytes(int64_t n, PixelMode m, bool transparency) {
    const bool alpha =
        m == PixelMode::kRGBA || m == PixelMode::kLA || (transparency && m != PixelMode::kRGB && m != PixelMode::kCMYK);
    return alpha ? 7 * n : 3 * n;
}

}   // namespace

int64_t prepare_bytes(const ImageHeader& h, const MediaConfig& c) {
    const ImageGeometry g = image_geometry(h.width, h.height, c);
    const int64_t w = h.width, hh = h.height, p = w * hh;
    const int64_t nw = g.new_width, nh = g.new_height, n = nw * nh;
    const int64_t q = (int64_t{g.new_width} + g.pad_width) * (int64_t{g.new_height} + g.pad_height);
    const bool resize = nw != w || nh != hh;
    const PixelMode m = h.mode;
    // The mode resize_image hands back (16-bit grey comes back as L).
    const PixelMode resized_mode = m == PixelMode::kI16 ? PixelMode::kL : m;
    int64_t peak = 0;
    if (c.fill_after_resize) {
        if (resize) {
            peak = std::max(peak, resize_bytes(w, hh, m, nw, nh));
            peak = std::max(peak, n * bytes_per_pixel(resized_mode) + to_rgb_bytes(n, resized_mode, h.transparency));
        } else {
            peak = std::max(peak, to_rgb_bytes(p, m, h.transparency));
        }
    } else {
        peak = std::max(peak, to_rgb_bytes(p, m, h.transparency));
        if (resize) peak = std::max(peak, 3 * p + bicubic_bytes(w, hh, 3, 1, nw, nh));
    }
    peak = std::max(peak, 3 * n + 3 * q);    // the padded copy next to the resized image
    peak = std::max(peak, 3 * q + 12 * q);   // the result: padded RGB bytes and float patches
    return peak + 64 * 1024;                 // error messages, the geometry, small vectors
}

}   // namespace kimi::image
