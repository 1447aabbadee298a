// The Kimi-K3 vision tower (MoonViT) and patch-merger projector weights, bound from the
// checkpoint's top-level vision_tower.* / mm_projector.* tensors by their tensor-layout rows
// (docs/vision.md#tensors). BF16 as published, never quantized; every rank holds them whole.
#pragma once
#include <vector>

#include "checkpoint/weight_store.h"
#include "model/config.h"

namespace kimi {

struct VisionBlockWeights {
    Tensor norm0, norm1;   // [D] f32 (prepared)
    Tensor wqkv;           // [3Q, D]  q | k | v, each head-major
    Tensor wo;             // [D, Q]
    Tensor fc0;            // [I, D]
    Tensor fc1;            // [D, I]
};

struct VisionWeights {
    Tensor patch;     // [D, 3·p·p]: the patch-embedding conv weight [D, 3, p, p] as a linear map
    Tensor pos_emb;   // [Gh, Gw, D] f32 (prepared)
    std::vector<VisionBlockWeights> blocks;
    Tensor final_norm;   // [D] f32 (prepared)
    Tensor proj0;        // [4D, 4D]
    Tensor proj2;        // [text hidden, 4D]
    Tensor post_norm;    // [text hidden] f32 (prepared)
};

class TensorLayout;

// Whether the checkpoint carries the tower (a K3 export may be text only): its patch embedding.
bool checkpoint_has_vision(const TensorLayout& layout, const WeightStore& s);
// Checks (presence, float dtype, exact shape) and prepares every tower and projector tensor,
// by the layout's vision rows; records what it keeps of each in held (ModelWeights::held).
VisionWeights bind_vision(const ModelConfig& c, WeightStore& s, const TensorLayout& layout, std::vector<Tensor>& held);

}   // namespace kimi
