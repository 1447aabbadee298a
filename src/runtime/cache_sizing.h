// CacheSizing: how big an engine's cache is — KDA state slots, MLA blocks and prefix-cache
// checkpoints — worked out from the EngineConfig and the model's cache geometry, and the
// startup line the commands print (docs/runtime.md "Cache"). On a model split over MPI ranks
// every rank takes rank 0's sizes.
#pragma once
#include <cstdint>
#include <string>

#include "model/kimi_model.h"
#include "runtime/engine_config.h"

namespace kimi {

// What the engine sized its cache to (printed at start by the commands).
struct CacheSizing {
    int32_t n_slots = 0, n_blocks = 0, block_size = 0, max_model_len = 0;
    // How max_model_len was chosen when --max-model-len was not given: the model's own limit
    // (max_position_embeddings / model_max_length; 0: the config has none, 4096 taken), capped by
    // what the cache memory holds for one sequence.
    int32_t model_max_len = 0;
    bool max_len_given = false;
    int64_t slot_bytes = 0, block_bytes = 0;   // one slot (all KDA layers), one block (all MLA layers)
    // A draft model's entries beside them in each slot and block (docs/runtime.md#draft-model).
    int64_t draft_slot_bytes = 0, draft_block_bytes = 0;
    bool prefix_caching = false;
    int32_t n_checkpoints = 0, checkpoint_interval = 0;   // KDA checkpoints of slot_bytes each
    int64_t total_bytes() const {
        return int64_t(n_slots) * (slot_bytes + draft_slot_bytes) +
            int64_t(n_blocks) * (block_bytes + draft_block_bytes);
    }
    int64_t cached_tokens() const { return int64_t(n_blocks) * block_size; }
    std::string describe() const;
    // A warning when --max-model-len is past the model's declared length (vLLM refuses that
    // unless told; here it runs, said once): "" otherwise.
    std::string length_warning() const;
};

// The sizes for config `c` on model `m`. Throws kimi::Error on a bad limit or when the cache
// or prefix-cache memory cannot hold what it must.
CacheSizing size_cache(const KimiModel& m, const EngineConfig& c);

// The prefix cache's default KDA checkpoint memory: eight checkpoints per sequence slot, at
// most an eighth of the memory available now.
int64_t default_prefix_cache_bytes(int64_t slot_bytes, int32_t max_num_seqs);

}   // namespace kimi
