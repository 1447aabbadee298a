// KimiModel: a loaded Kimi Linear or Kimi-K3 (text model) checkpoint and its forward pass
// (embedding → L × [RMSNorm → KDA|MLA → +residual → RMSNorm → MLP|MoE → +residual]
//  → final RMSNorm → lm_head). With Block Attention Residuals (K3) the residual stream is a
// partial sum plus banked block snapshots, mixed before each sublayer and the final norm.
// ref: docs/model.md#decoder and docs/model.md#k3; HF modeling_kimi.py KimiDecoderLayer, K3 modeling_kimi_linear.py.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/cache_storage.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/model_weights.h"
#include "checkpoint/weight_shard.h"
#include "backend/exec.h"

namespace kimi {

class KimiModel {
public:
    // Loads config.json + weights (mapped or read into huge pages: WeightMemory), validates
    // everything, prepares. progress(done, total): the bytes read (copy) or checked (mmap).
    // Throws kimi::Error.
    // shard (tensor/expert parallelism): this process is rank shard.rank of shard.size, which
    // must be the MPI world (dist::Comm::world()); it keeps only its slices (weight_shard.h).
    // Every rank must then run each forward step on the same batch.
    // check_weights: each tensor sampled for NaN/Inf as it is bound (WeightStore::set_check_weights).
    static std::unique_ptr<KimiModel> load(const std::string& model_dir, const LoadProgress& progress = {},
                                           WeightMemory memory = WeightMemory::kAuto, const Shard& shard = {},
                                           bool check_weights = true);

    const ModelConfig& config() const { return cfg_; }
    // The config of this rank's part: cfg_ with its own KDA and MLA head counts.
    const Shard& shard() const { return shard_; }
    const ModelWeights& weights() const { return weights_; }
    const WeightStore& store() const { return *store_; }

    // Cache geometry for the given pool sizes (MLA block size 16 unless given).
    // latent_bf16: the MLA latents stored as bf16 (--kv-cache-dtype bf16).
    CacheGeometry cache_geometry(int32_t n_slots, int32_t n_blocks, int32_t block_size = 16,
                                 bool latent_bf16 = false) const;

    // One forward step over the batch; returns logits [R, vocab] (arena-owned) for
    // batch.logit_rows. Token ids are range-checked first (kimi::Error). Updates the caches
    // and ex.counters (copies, heap allocations, tokens, step time).
    Tensor forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache) const;

    // K3 vision: whether the checkpoint carries the tower, and why not (a one-line reason
    // for a 400; "" when it does).
    bool has_vision() const { return weights_.vision.has_value(); }
    std::string vision_unavailable_reason() const;
    // One image's projector output [N, D] (arena-owned) from its patches [grid_h·grid_w,
    // 3·p·p] (docs/vision.md#tower). Throws kimi::Error without a tower.
    Tensor encode_image(Exec& ex, const Tensor& patches, int64_t grid_h, int64_t grid_w,
                        const std::function<void(int64_t, int64_t)>& progress = {}) const;

    // The residual state between layers: the residual stream (or AttnRes partial sum) and the
    // block snapshots banked so far (arena-owned; AttnRes only).
    struct Residual {
        Tensor partial;                    // [T, D]
        std::span<const Tensor*> blocks;   // capacity: the config's block count
        size_t n_blocks = 0;
        Arena* home = nullptr;   // owns partial and the blocks (outlives the layers)
    };
    Residual new_residual(Exec& ex, int64_t n_tokens) const;

    // One decoder layer on the residual state (exposed for the ownership tests).
    void layer_forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache, int64_t layer, Residual& res) const;

private:
    void embed(Exec& ex, std::span<const int32_t> ids, Tensor& y) const;   // vocabulary-parallel when split
    Tensor lm_head(Exec& ex, const Tensor& rows) const;                    // [R, vocab] on every rank

    ModelConfig cfg_, local_;
    Shard shard_;
    dist::Comm* comm_ = nullptr;            // set when split
    mutable std::vector<float> gathered_;   // lm_head's all-gather (kept: no allocation per step)
    std::unique_ptr<WeightStore> store_;
    ModelWeights weights_;
};

}   // namespace kimi
