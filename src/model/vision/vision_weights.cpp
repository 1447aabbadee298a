// bind_vision: the tower's and projector's tensors by their tensor-layout rows (see
// vision_weights.h); norms and the position grid widened to f32, the rest read in place.
#include "model/vision/vision_weights.h"

#include "model/tensor_layout.h"

namespace kimi {

bool checkpoint_has_vision(const ModelConfig& c, const WeightStore& s) {
    return c.vision.present && s.has_top_level("vision_tower.patch_embed.proj.weight");
}

VisionWeights bind_vision(const ModelConfig& c, WeightStore& s) {
    const TensorLayout layout(c);
    const VisionConfig& v = c.vision;
    const auto get = [&](const std::string& name) { return s.get_top_level(name, layout.at(name).shape); };
    const auto f32 = [&](const std::string& name) { return s.to_f32(get(name)); };
    VisionWeights w;
    w.patch = get("vision_tower.patch_embed.proj.weight").view({v.hidden, v.patch_dim()});
    w.pos_emb = f32("vision_tower.patch_embed.pos_emb.weight");
    for (int64_t i = 0; i < v.n_layers; ++i) {
        const std::string b = "vision_tower.encoder.blocks." + std::to_string(i) + ".";
        VisionBlockWeights bw;
        bw.norm0 = f32(b + "norm0.weight");
        bw.norm1 = f32(b + "norm1.weight");
        bw.wqkv = get(b + "wqkv.weight");
        bw.wo = get(b + "wo.weight");
        bw.fc0 = get(b + "mlp.fc0.weight");
        bw.fc1 = get(b + "mlp.fc1.weight");
        w.blocks.push_back(bw);
    }
    w.final_norm = f32("vision_tower.encoder.final_layernorm.weight");
    w.proj0 = get("mm_projector.proj.0.weight");
    w.proj2 = get("mm_projector.proj.2.weight");
    w.post_norm = f32("mm_projector.post_norm.weight");
    return w;
}

}   // namespace kimi
