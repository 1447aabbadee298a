// The Kimi-K3 vision path for one image: patch embedding + (interpolated) position grid, the
// MoonViT blocks (pre-norm, 2-D RoPE, bidirectional attention within the image, GELU-tanh MLP),
// the final norm, the 2×2 patch merge and the projector into the text model's width.
// ref: docs/vision.md#tower and docs/vision.md#projector; the K3 checkpoint's modeling code
// (MoonViT3dEncoder, PatchMergerMLPV2).
#pragma once
#include <functional>

#include "backend/exec.h"
#include "model/config.h"
#include "model/vision/vision_weights.h"

namespace kimi {

// patches: [grid_h · grid_w, 3·p·p] f32 (rows in row-major grid order, each channel, row,
// column; docs/vision.md#pixels) → [(grid_h/2) · (grid_w/2), text hidden], arena-owned. The
// grid sides must be even. Each matrix product runs at ex.precision; with ex.layer_arena its
// scratch goes there (reset after each product), else to ex.arena. progress(blocks done,
// blocks) after each tower block (big images take a while).
using VisionProgress = std::function<void(int64_t, int64_t)>;
Tensor encode_image(Exec& ex, const VisionConfig& c, const VisionWeights& w, const Tensor& patches, int64_t grid_h,
                    int64_t grid_w, const VisionProgress& progress = {});

// The position grid at (grid_h, grid_w): the learned [Gh, Gw, D] grid as is when the sizes
// agree, else bilinearly resampled (half-pixel centres, edges clamped, no antialiasing).
// Writes [grid_h · grid_w, D] into pos.
void interpolate_pos_emb(const Tensor& grid, int64_t grid_h, int64_t grid_w, Tensor& pos);

}   // namespace kimi
