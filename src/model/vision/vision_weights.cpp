// bind_vision: the tower's and projector's tensors by their tensor-layout rows (see
// vision_weights.h); norms and the position grid widened to f32, the rest read in place.
#include "model/vision/vision_weights.h"

#include "model/tensor_layout.h"

namespace kimi {

bool checkpoint_has_vision(const TensorLayout& layout, const WeightStore& s) {
    const TensorRow* patch = layout.find(Slot::kPatchEmbed);
    return patch && s.has_top_level(layout.full_name(*patch));
}

VisionWeights bind_vision(const ModelConfig& c, WeightStore& s, const TensorLayout& layout, std::vector<Tensor>& held) {
    const VisionConfig& v = c.vision;
    const auto get = [&](Slot slot, int64_t block = -1) {
        const TensorRow* r = layout.find(slot, block);
        KIMI_CHECK(r, "tensor layout: no vision row for this slot");
        return held[layout.index_of(*r)] = s.get_top_level(layout.full_name(*r), r->shape);
    };
    const auto f32 = [&](Slot slot, int64_t block = -1) {
        const TensorRow* r = layout.find(slot, block);
        return held[layout.index_of(*r)] = s.to_f32(get(slot, block));
    };
    VisionWeights w;
    w.patch = get(Slot::kPatchEmbed).view({v.hidden, v.patch_dim()});
    w.pos_emb = f32(Slot::kPosEmb);
    for (int64_t i = 0; i < v.n_layers; ++i) {
        VisionBlockWeights bw;
        bw.norm0 = f32(Slot::kVisNorm0, i);
        bw.norm1 = f32(Slot::kVisNorm1, i);
        bw.wqkv = get(Slot::kVisQkv, i);
        bw.wo = get(Slot::kVisO, i);
        bw.fc0 = get(Slot::kVisFc0, i);
        bw.fc1 = get(Slot::kVisFc1, i);
        w.blocks.push_back(bw);
    }
    w.final_norm = f32(Slot::kVisFinalNorm);
    w.proj0 = get(Slot::kProj0);
    w.proj2 = get(Slot::kProj2);
    w.post_norm = f32(Slot::kProjPostNorm);
    return w;
}

}   // namespace kimi
