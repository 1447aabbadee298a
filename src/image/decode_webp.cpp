// WebP → DecodedImage over libwebp's WebPAnimDecoder, the path Pillow 9.4 (built with webpdemux)
// takes for every WebP: the first frame composited on the canvas in straight RGBA, reported as
// RGB when the file has no alpha (Pillow's "RGBX") and RGBA when it has.
#include <webp/decode.h>
#include <webp/demux.h>

#include <string>

#include "core/error.h"
#include "image/decode_internal.h"

namespace kimi::image::detail {

namespace {

struct AnimDecoderGuard {
    WebPAnimDecoder* dec = nullptr;
    ~AnimDecoderGuard() {
        if (dec) WebPAnimDecoderDelete(dec);
    }
};

}   // namespace

DecodedImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    WebPBitstreamFeatures features;
    const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
    if (status != VP8_STATUS_OK) throw Error("webp: invalid or truncated file (status " + std::to_string(status) + ")");
    // For an extended (VP8X) file these are the canvas dimensions, which WebPAnimDecoder allocates.
    check_dimensions("webp", features.width, features.height, limits);

    WebPAnimDecoderOptions options;
    if (!WebPAnimDecoderOptionsInit(&options)) throw Error("webp: library version mismatch");
    options.color_mode = MODE_RGBA;
    options.use_threads = 0;
    const WebPData data{bytes.data(), bytes.size()};
    AnimDecoderGuard guard;
    guard.dec = WebPAnimDecoderNew(&data, &options);
    if (!guard.dec) throw Error("webp: could not decode the file (invalid or truncated)");
    WebPAnimInfo info;
    if (!WebPAnimDecoderGetInfo(guard.dec, &info)) throw Error("webp: could not read the image info");
    check_dimensions("webp", info.canvas_width, info.canvas_height, limits);
    if (static_cast<int64_t>(info.canvas_width) != features.width ||
        static_cast<int64_t>(info.canvas_height) != features.height)
        throw Error("webp: inconsistent canvas size");
    uint8_t* canvas = nullptr;
    int timestamp = 0;
    if (!WebPAnimDecoderGetNext(guard.dec, &canvas, &timestamp) || !canvas)
        throw Error("webp: could not decode the first frame");

    DecodedImage img;
    img.width = static_cast<int32_t>(info.canvas_width);
    img.height = static_cast<int32_t>(info.canvas_height);
    img.mode = features.has_alpha ? PixelMode::kRGBA : PixelMode::kRGB;
    const size_t n = static_cast<size_t>(img.width) * static_cast<size_t>(img.height);
    if (img.mode == PixelMode::kRGBA) {
        img.pixels.assign(canvas, canvas + 4 * n);
    } else {
        img.pixels.resize(3 * n);
        for (size_t i = 0; i < n; ++i) {
            img.pixels[3 * i] = canvas[4 * i];
            img.pixels[3 * i + 1] = canvas[4 * i + 1];
            img.pixels[3 * i + 2] = canvas[4 * i + 2];
        }
    }
    return img;
}

}   // namespace kimi::image::detail
