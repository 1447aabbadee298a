// Pillow 9.4's resize kernels, byte-identical: BICUBIC (libImaging/Resample.c: a = -0.5,
// antialiased support, 8-bit fixed-point coefficients, the horizontal pass over only the rows
// the vertical pass reads) on interleaved 8-bit images with 1–4 channels and on 32-bit integer
// planes (Pillow mode "I"), and NEAREST (Geometry.c's affine scaling) on any pixel size.
// Internal to kimi_image; callers pass valid sizes (≥ 1) and matching buffers.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kimi::image {

// src: [h, w, channels] interleaved → [new_h, new_w, channels]. channels 1–4.
std::vector<uint8_t> resize_bicubic_u8(std::span<const uint8_t> src, int32_t w, int32_t h, int channels, int32_t new_w,
                                       int32_t new_h);

// Pillow mode "I": [h, w] int32 → [new_h, new_w] int32 (double sums, rounded half away from zero,
// not clipped: ringing can leave the input range).
std::vector<int32_t> resize_bicubic_i32(std::span<const int32_t> src, int32_t w, int32_t h, int32_t new_w,
                                        int32_t new_h);

// NEAREST: [h, w] pixels of pixel_bytes each → [new_h, new_w] (what Pillow does for modes "1" and "P").
std::vector<uint8_t> resize_nearest(std::span<const uint8_t> src, int32_t w, int32_t h, int pixel_bytes, int32_t new_w,
                                    int32_t new_h);

}   // namespace kimi::image
