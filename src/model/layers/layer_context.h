// LayerContext: what a layer's forward needs besides its weights and input — the exec
// context, the config, the step's sequences and the cache tensors.
#pragma once
#include "cache/cache_storage.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "ops/ops.h"

namespace kimi {

struct LayerContext {
    Exec& ex;
    const ModelConfig& cfg;
    const ForwardBatch& batch;
    CacheStorage& cache;
    ops::SeqLayout seqs;   // seq_starts + state slots of the batch
};

}   // namespace kimi
