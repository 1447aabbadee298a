// libFuzzer target: the image decoders (PNG, JPEG, WebP, GIF, BMP, with EXIF orientation) and
// the K3 preprocessing of whatever they accept (src/image).
// Input: the encoded image bytes.
// Checked beyond "no crash": an accepted image has a positive size within the limits and
// exactly width × height × bytes-per-pixel bytes (a palette of 256 RGBA entries in mode P);
// its preparation gives whole 2×2 cells of patches, one per patch of the padded image.
// Clean errors: kimi::Error.
#include <cstdint>
#include <span>

#include "core/error.h"
#include "fuzz_util.h"
#include "image/decode.h"
#include "image/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    kimi::image::DecodeLimits limits;
    limits.max_pixels = 1 << 20;   // keep each run short; the limits themselves are checked here too
    limits.max_side = 4096;
    try {
        const kimi::image::DecodedImage img = kimi::image::decode_image(std::span<const uint8_t>(data, size), limits);
        fuzz_assert(img.width > 0 && img.height > 0 && img.width <= limits.max_side && img.height <= limits.max_side);
        fuzz_assert(int64_t(img.width) * img.height <= limits.max_pixels);
        fuzz_assert(img.pixels.size() ==
                    size_t(img.width) * size_t(img.height) * size_t(kimi::image::bytes_per_pixel(img.mode)));
        if (img.mode == kimi::image::PixelMode::kP) fuzz_assert(img.palette.size() == 1024);
        kimi::image::MediaConfig mc;
        mc.in_patch_limit = 256;   // small: the resize and the cut are what is fuzzed, not the sizes
        const kimi::image::PreparedImage p = kimi::image::prepare_image(img, mc);
        const auto& g = p.geom;
        fuzz_assert(g.grid_h % 2 == 0 && g.grid_w % 2 == 0 && g.n_tokens == int64_t(g.grid_h / 2) * (g.grid_w / 2));
        fuzz_assert(p.patches.size() == size_t(g.grid_h) * size_t(g.grid_w) * size_t(mc.patch_dim()));
        fuzz_assert(p.rgb.size() == size_t(g.grid_h) * 14 * size_t(g.grid_w) * 14 * 3);
    } catch (const kimi::Error&) {
        kimi::fuzz::note_refusal("image");
    }
    return 0;
}
