// CheckpointPlanner: where the prefix cache's KDA checkpoints are taken (docs/runtime.md
// "When checkpoints are taken"). Before a step it plans, per scheduled chunk, the checkpoint
// positions inside the chunk — every multiple of the interval and the prompt's own positions —
// as state captures the forward pass writes into checkpoint slots (ops::StateCapture), skipping
// prefixes the store already holds; after the step it names them and saves the checkpoint at a
// chunk's end when that end is a checkpoint position, or, past the prompt, moves the request's
// own tail checkpoint forward block by block. Integers only, like the cache manager; no heap
// allocation after construction.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "cache/cache_manager.h"
#include "cache/cache_storage.h"
#include "cache/checkpoint_store.h"

namespace kimi {

class CheckpointPlanner {
public:
    using TokenAt = CacheManager::TokenAt;
    // interval: tokens between checkpoints, a whole number of blocks (CacheSizing).
    CheckpointPlanner(CacheManager& cache, CheckpointStore& store, CacheStorage& storage, int32_t interval);

    // Before a step: forgets the last step's captures.
    void clear();
    // Plans the captures inside the chunk [from, from + n_tokens) of request `id`, sequence
    // `seq` of the batch (prompt_len: its prompt's length; token_at: its token ids). Chunks
    // come in batch order. false: no more captures this step (prefix caching off, no
    // checkpoints, or every checkpoint entry is being written).
    bool plan_chunk(int32_t seq, uint64_t id, int64_t from, int64_t n_tokens, int64_t prompt_len,
                    const TokenAt& token_at);
    // The planned captures, ordered by (seq, t).
    std::span<const ops::StateCapture> captures() const { return captures_; }
    // After the forward pass: names the captured checkpoints.
    void commit_captures();
    // After the step (its blocks named), a chunk of request `id` ended at `end` tokens: a
    // checkpoint position keeps its state; past the prompt, the request's tail checkpoint moves
    // there. Returns the request's tail checkpoint (tail, or the one just saved).
    uint64_t save_chunk_end(uint64_t id, int64_t end, int64_t prompt_len, uint64_t tail);

private:
    CacheManager& cache_;
    CheckpointStore& store_;
    CacheStorage& storage_;
    int64_t interval_;
    std::vector<ops::StateCapture> captures_;
    std::vector<uint64_t> capture_hashes_;   // captures_[i] is named capture_hashes_[i]
};

}   // namespace kimi
