// The K3 image preprocessing (see preprocess.h), step by step as the checkpoint's Python runs it
// over Pillow 9.4 and numpy: the resize budget in Python doubles, image.resize(BICUBIC) in the
// mode the image was opened in, the transparent background composited in float32, zero padding,
// normalisation in float32 and the cut into patches.
#include "image/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "image/convert.h"
#include "image/resample.h"

namespace kimi::image {
namespace {

// alpha · rgb + (1 − alpha) · bg in float32 (alpha = A / 255 in float32), truncated to uint8.
// The chessboard puts gray_value where (y / sq + x / sq) % 2 == (on_top_left ? 1 : 0).
std::vector<uint8_t> composite(const std::vector<uint8_t>& rgba, int32_t w, int32_t h, const MediaConfig& c) {
    int32_t flat = -1;   // the value of a uniform pattern, -1 for the chessboard
    if (c.bg_pattern == "white") {
        flat = 255;
    } else if (c.bg_pattern == "black") {
        flat = 0;
    } else if (c.bg_pattern == "gray") {
        flat = 128;
    } else if (c.bg_pattern != "chessboard") {
        throw Error("image: unknown transparent background pattern \"" + c.bg_pattern + "\"");
    } else if (c.chessboard_square_size < 1) {
        throw Error("image: chessboard_square_size must be >= 1");
    }
    const int32_t sq = c.chessboard_square_size, gray_parity = c.chessboard_square_on_top_left ? 1 : 0;
    float alpha[256];
    for (int a = 0; a < 256; ++a) alpha[a] = static_cast<float>(a) / 255.0f;
    std::vector<uint8_t> out(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
    for (int32_t y = 0; y < h; ++y) {
        for (int32_t x = 0; x < w; ++x) {
            const size_t i = static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x);
            int32_t bgv = flat;
            if (flat < 0)
                bgv = (y / sq + x / sq) % 2 == gray_parity ? c.chessboard_gray_value : c.chessboard_white_value;
            const float a = alpha[rgba[4 * i + 3]];
            const float bg = static_cast<float>(bgv);
            const float inv = 1.0f - a;
            for (size_t ch = 0; ch < 3; ++ch) {
                const float fg = a * static_cast<float>(rgba[4 * i + ch]);
                const float v = fg + inv * bg;   // -ffp-contract=off: rounded twice, as numpy does
                out[3 * i + ch] = static_cast<uint8_t>(v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v));
            }
        }
    }
    return out;
}

// RGB as is; alpha or transparency → composited onto the background (or dropped when the config
// has none); anything else → convert("RGB").
std::vector<uint8_t> to_rgb(const DecodedImage& img, const MediaConfig& c) {
    if (img.mode != PixelMode::kRGB && c.has_transparent_bg && has_alpha(img)) {
        return composite(convert_to_rgba(img), img.width, img.height, c);
    }
    return convert_to_rgb(img);
}

void check_config(const MediaConfig& c) {
    if (c.patch_size < 1 || c.merge_kernel_size < 1 || c.in_patch_limit < 1 || c.patch_limit_on_one_side < 1) {
        throw Error("image: media config sizes must be >= 1 (patch_size " + std::to_string(c.patch_size) +
                    ", merge_kernel_size " + std::to_string(c.merge_kernel_size) + ", in_patch_limit " +
                    std::to_string(c.in_patch_limit) + ", patch_limit_on_one_side " +
                    std::to_string(c.patch_limit_on_one_side) + ")");
    }
}

}   // namespace

DecodedImage resize_image(const DecodedImage& img, int32_t new_w, int32_t new_h) {
    check_decoded_image(img);
    if (new_w == img.width && new_h == img.height) return img;
    DecodedImage out;
    out.width = new_w;
    out.height = new_h;
    out.mode = img.mode;
    out.palette = img.palette;
    out.has_transparency = img.has_transparency;
    out.transparent_value = img.transparent_value;
    out.format = img.format;
    switch (img.mode) {
        case PixelMode::k1:
        case PixelMode::kP: out.pixels = resize_nearest(img.pixels, img.width, img.height, 1, new_w, new_h); break;
        case PixelMode::kLA:
        case PixelMode::kRGBA: {
            const int ch = img.mode == PixelMode::kLA ? 2 : 4;
            std::vector<uint8_t> pre = img.pixels;
            premultiply_alpha(pre, ch);
            out.pixels = resize_bicubic_u8(pre, img.width, img.height, ch, new_w, new_h);
            unpremultiply_alpha(out.pixels, ch);
            break;
        }
        case PixelMode::kI16: {
            const size_t n = img.pixels.size() / 2;
            std::vector<int32_t> wide(n);
            for (size_t i = 0; i < n; ++i) {
                uint16_t v;
                std::memcpy(&v, &img.pixels[2 * i], sizeof v);
                wide[i] = v;
            }
            const std::vector<int32_t> r = resize_bicubic_i32(wide, img.width, img.height, new_w, new_h);
            out.mode = PixelMode::kL;
            out.pixels.resize(r.size());
            for (size_t i = 0; i < r.size(); ++i)
                out.pixels[i] = static_cast<uint8_t>(r[i] < 0 ? 0 : (r[i] > 255 ? 255 : r[i]));
            if (out.transparent_value >= 0) out.transparent_value &= 0xff;
            break;
        }
        default:   // L, RGB, CMYK
            out.pixels = resize_bicubic_u8(img.pixels, img.width, img.height, bytes_per_pixel(img.mode), new_w, new_h);
            break;
    }
    return out;
}

ImageGeometry image_geometry(int32_t width, int32_t height, const MediaConfig& c) {
    check_config(c);
    if (width < 1 || height < 1) {
        throw Error("image: empty or negative size " + std::to_string(width) + "x" + std::to_string(height));
    }
    const int64_t p = c.patch_size;
    // Python: sqrt(in_patch_limit / (max(1.0, W // p) * max(1.0, H // p))) and limit_side * p / W:
    // every operand is an exact integer below 2^53, so double arithmetic rounds as Python does.
    const double wp = std::max(1.0, static_cast<double>(width / p));
    const double hp = std::max(1.0, static_cast<double>(height / p));
    const int64_t side_px = int64_t{c.patch_limit_on_one_side} * p;
    const double s1 = std::sqrt(static_cast<double>(c.in_patch_limit) / (wp * hp));
    const double s2 = static_cast<double>(side_px) / width;
    const double s3 = static_cast<double>(side_px) / height;
    const double scale = std::min(std::min(1.0, s1), std::min(s2, s3));
    // int(W * scale) truncates; scale ≤ 1 keeps it within [0, W].
    const int64_t nw = std::min(std::max<int64_t>(1, static_cast<int64_t>(width * scale)), side_px);
    const int64_t nh = std::min(std::max<int64_t>(1, static_cast<int64_t>(height * scale)), side_px);
    const int64_t factor = int64_t{c.merge_kernel_size} * p;
    const int64_t pw = (factor - nw % factor) % factor, ph = (factor - nh % factor) % factor;
    if (nw + pw > INT32_MAX || nh + ph > INT32_MAX) {
        throw Error("image: padded size " + std::to_string(nw + pw) + "x" + std::to_string(nh + ph) + " is too large");
    }
    ImageGeometry g;
    g.width = width;
    g.height = height;
    g.new_width = static_cast<int32_t>(nw);
    g.new_height = static_cast<int32_t>(nh);
    g.pad_width = static_cast<int32_t>(pw);
    g.pad_height = static_cast<int32_t>(ph);
    g.grid_w = static_cast<int32_t>((nw + pw) / p);
    g.grid_h = static_cast<int32_t>((nh + ph) / p);
    g.n_tokens = ((nh + ph) / factor) * ((nw + pw) / factor);   // each factor ≤ 2^31: no overflow
    return g;
}

PreparedImage prepare_image(const DecodedImage& img, const MediaConfig& c) {
    check_decoded_image(img);
    PreparedImage out;
    out.geom = image_geometry(img.width, img.height, c);
    const ImageGeometry& g = out.geom;
    const int64_t padded_w = int64_t{g.new_width} + g.pad_width, padded_h = int64_t{g.new_height} + g.pad_height;
    constexpr int64_t kMaxPaddedPixels = int64_t{1} << 32;   // far above any in_patch_limit a model uses
    if (padded_w * padded_h > kMaxPaddedPixels) {
        throw Error("image: " + std::to_string(padded_w) + "x" + std::to_string(padded_h) +
                    " after resize and padding is too large");
    }
    const bool resize = g.new_width != img.width || g.new_height != img.height;

    std::vector<uint8_t> rgb;   // [new_height, new_width, 3]
    if (c.fill_after_resize) {
        if (resize) {
            rgb = to_rgb(resize_image(img, g.new_width, g.new_height), c);
        } else {
            rgb = to_rgb(img, c);   // Pillow returns a copy for an unchanged size
        }
    } else {
        rgb = to_rgb(img, c);
        if (resize) rgb = resize_bicubic_u8(rgb, img.width, img.height, 3, g.new_width, g.new_height);
    }

    // Zero padding right and bottom (rows stay in place when only the bottom grows).
    const size_t pw = static_cast<size_t>(padded_w), ph = static_cast<size_t>(padded_h);
    if (g.pad_width == 0) {
        out.rgb = std::move(rgb);
        out.rgb.reserve(pw * ph * 3);   // exactly (resize alone may grow the capacity to twice the size)
        out.rgb.resize(pw * ph * 3, 0);
    } else {
        const size_t row = static_cast<size_t>(g.new_width) * 3;
        out.rgb.assign(pw * ph * 3, 0);
        for (size_t y = 0; y < static_cast<size_t>(g.new_height); ++y) {
            std::memcpy(&out.rgb[y * pw * 3], &rgb[y * row], row);
        }
        std::vector<uint8_t>().swap(rgb);   // freed now (`rgb = {}` would keep its capacity)
    }

    // Normalisation: float32(u8 / 255.0) − mean, × float32(1 / std), as a per-channel table.
    float lut[3][256];
    for (int ch = 0; ch < 3; ++ch) {
        const double sd = static_cast<float>(c.image_std_exact[ch]) == c.image_std[ch] ? c.image_std_exact[ch]
                                                                                       : double{c.image_std[ch]};
        const float inv_std = static_cast<float>(1.0 / sd);
        for (int v = 0; v < 256; ++v) {
            float x = static_cast<float>(v / 255.0);
            x -= c.image_mean[ch];
            x *= inv_std;
            lut[ch][v] = x;
        }
    }

    // Patches row-major; inside one patch: channel, then row, then column.
    const size_t p = static_cast<size_t>(c.patch_size), gw = static_cast<size_t>(g.grid_w);
    const size_t gh = static_cast<size_t>(g.grid_h), pp = p * p;
    out.patches.resize(gh * gw * 3 * pp);
    for (size_t gy = 0; gy < gh; ++gy) {
        for (size_t gx = 0; gx < gw; ++gx) {
            float* dst = &out.patches[(gy * gw + gx) * 3 * pp];
            for (size_t r = 0; r < p; ++r) {
                const uint8_t* src = &out.rgb[((gy * p + r) * pw + gx * p) * 3];
                for (size_t col = 0; col < p; ++col) {
                    for (size_t ch = 0; ch < 3; ++ch) dst[ch * pp + r * p + col] = lut[ch][src[col * 3 + ch]];
                }
            }
        }
    }
    return out;
}

}   // namespace kimi::image
