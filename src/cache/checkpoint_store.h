// CheckpointStore: the KDA half of the prefix cache. A recurrent layer cannot resume from an
// arbitrary position, so the whole recurrent state of a sequence (every KDA layer's state and
// conv windows: CacheStorage::save_slot) is kept at block-aligned positions, named by the hash
// chain of the prefix it summarises (cache/prefix_hash.h). A fixed number of entries sized from
// a memory budget, evicted least recently used first; restoring one is a copy into a state slot.
// ref: vLLM v1's hybrid "align" prefix caching for Mamba-style states (one state per block boundary).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cache/cache_storage.h"

namespace kimi {

class CheckpointStore {
public:
    // Room for as many checkpoints of `bytes_per_checkpoint` as fit in budget_bytes (≥ 0).
    CheckpointStore(int64_t bytes_per_checkpoint, int64_t budget_bytes);

    int32_t capacity() const { return int32_t(used_.size()); }
    int32_t size() const { return int32_t(by_hash_.size()); }
    int64_t bytes_per_checkpoint() const { return floats_ * 4; }
    int64_t bytes_used() const { return int64_t(size()) * bytes_per_checkpoint(); }

    bool contains(uint64_t hash) const { return by_hash_.count(hash) != 0; }
    // Saves slot's state under `hash` (a no-op if present; evicts the least recently used entry
    // when full; nothing when the capacity is 0).
    void save(uint64_t hash, const CacheStorage& storage, int32_t slot);
    // Copies the checkpoint `hash` into `slot` and marks it recently used; false if absent.
    bool restore(uint64_t hash, CacheStorage& storage, int32_t slot);

private:
    void touch(int32_t entry);

    int64_t floats_;
    std::unique_ptr<float[]> data_;          // [capacity, floats_]
    std::vector<uint64_t> used_;             // entry → hash (0: empty)
    std::vector<uint64_t> stamp_;            // entry → last use
    uint64_t clock_ = 0;
    std::unordered_map<uint64_t, int32_t> by_hash_;
};

}  // namespace kimi
