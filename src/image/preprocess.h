// The K3 image preprocessing (the checkpoint's preprocessor_config.json `media_proc_cfg`):
// the resize budget, Pillow-exact BICUBIC resize of the image as decoded, the transparent
// background composited after the resize, padding to a multiple of patch·merge, normalisation
// and the cut into patches. ref: docs/vision.md#pixels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "image/decoded_image.h"

namespace kimi::image {

struct MediaConfig {
    int32_t patch_size = 14;
    int32_t merge_kernel_size = 2;
    int64_t in_patch_limit = 65536;
    int32_t patch_limit_on_one_side = 512;
    float image_mean[3] = {0.5f, 0.5f, 0.5f};
    float image_std[3] = {0.5f, 0.5f, 0.5f};
    // image_std as the config's doubles: the normalisation multiplies by float32(1 / std) with the
    // division in double, as the reference does. Used while it rounds to image_std (so a caller
    // who sets only image_std gets float32(1 / double(image_std))).
    double image_std_exact[3] = {0.5, 0.5, 0.5};
    // transparent_bg_config (none: alpha is dropped, as Pillow's convert("RGB") drops it)
    bool has_transparent_bg = true;
    std::string bg_pattern = "chessboard";   // "white" | "black" | "gray" | "chessboard"
    int32_t chessboard_square_size = 8;
    bool chessboard_square_on_top_left = true;
    int32_t chessboard_white_value = 255, chessboard_gray_value = 180;
    bool fill_after_resize = true;   // transparent_bg_fill_stage: "after_resize" | "before_resize"

    int32_t patch_dim() const { return 3 * patch_size * patch_size; }   // 588
};

// preprocessor_config.json (its `media_proc_cfg` object); absent keys keep the defaults
// above; wrong types, out-of-range values and values this pipeline does not implement
// (fixed_output_tokens, a non-square merge kernel, another pattern) are one-line kimi::Error
// naming the key and `source`. Video-only settings do not affect images and are ignored.
MediaConfig parse_media_config(const nlohmann::json& preprocessor_config, const std::string& source);

struct ImageGeometry {
    int32_t width = 0, height = 0;           // as decoded (after EXIF orientation)
    int32_t new_width = 0, new_height = 0;   // after the resize
    int32_t pad_width = 0, pad_height = 0;   // zeros added right / bottom
    int32_t grid_h = 0, grid_w = 0;          // patches per column / row: (new + pad) / patch_size
    int64_t n_tokens = 0;                    // (grid_h / merge) · (grid_w / merge)
};

ImageGeometry image_geometry(int32_t width, int32_t height, const MediaConfig& c);

struct PreparedImage {
    ImageGeometry geom;
    std::vector<uint8_t> rgb;   // [new_height + pad_height, new_width + pad_width, 3] before normalising
    // [grid_h · grid_w, 3 · patch · patch]: patches row-major, each (channel, row, column)
    std::vector<float> patches;
};

PreparedImage prepare_image(const DecodedImage& img, const MediaConfig& c);

// Pillow 9.4's image.resize((new_width, new_height), BICUBIC) on the image in its own mode: "1" and
// "P" by nearest neighbour (palette and transparency kept), RGBA / LA through premultiplied alpha,
// L / RGB / CMYK per channel. 16-bit grey resizes as Pillow's mode "I" (how Pillow 9.4 opens 16-bit
// PNGs; it refuses to resize "I;16") and comes back as L holding the value clipped to 8 bits, with
// the transparent value's low byte: all that the later steps read. Same size: a copy.
DecodedImage resize_image(const DecodedImage& img, int32_t new_width, int32_t new_height);

}   // namespace kimi::image
