// KimiLinearModel: a loaded Kimi Linear checkpoint and its forward pass
// (embedding → L × [RMSNorm → KDA|MLA → +residual → RMSNorm → MLP|MoE → +residual]
//  → final RMSNorm → lm_head). ref: model-spec §6; HF modeling_kimi.py KimiDecoderLayer.
#pragma once
#include <memory>
#include <string>

#include "cache/cache_storage.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/model_weights.h"
#include "backend/exec.h"

namespace kimi {

class KimiLinearModel {
public:
    // Loads config.json + weights (mmap), validates everything, prepares. Throws kimi::Error.
    static std::unique_ptr<KimiLinearModel> load(const std::string& model_dir, const LoadProgress& progress = {});

    const ModelConfig& config() const { return cfg_; }
    const ModelWeights& weights() const { return weights_; }
    const WeightStore& store() const { return *store_; }

    // Cache geometry for the given pool sizes (MLA block size 16 unless given).
    CacheGeometry cache_geometry(int32_t n_slots, int32_t n_blocks, int32_t block_size = 16) const;

    // One forward step over the batch; returns logits [R, vocab] (arena-owned) for
    // batch.logit_rows. Token ids are range-checked first (kimi::Error). Updates the caches
    // and ex.counters (copies, heap allocations, tokens, step time).
    Tensor forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache) const;

    // One decoder layer on the residual stream (exposed for the ownership tests).
    void layer_forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache, int64_t layer, Tensor& residual) const;

private:
    ModelConfig cfg_;
    std::unique_ptr<WeightStore> store_;
    ModelWeights weights_;
};

}  // namespace kimi
