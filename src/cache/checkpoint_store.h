// CheckpointStore: the KDA half of the prefix cache. A recurrent layer cannot resume from an
// arbitrary position, so the whole recurrent state of a sequence (every KDA layer's state and
// conv windows) is kept at block-aligned positions, named by the hash chain of the prefix it
// summarises (cache/prefix_hash.h). Checkpoints are state slots of the CacheStorage past the
// running ones — a fixed number sized from a memory budget, reused least recently used first —
// so a step can write one mid-sequence (ops::StateCapture) and restoring one is a slot copy.
// Bookkeeping only, no heap allocation after construction.
// ref: vLLM v1's hybrid "align" prefix caching for Mamba-style states (one state per block boundary).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "cache/cache_storage.h"
#include "cache/hash_index.h"

namespace kimi {

class CheckpointStore {
public:
    // Entries are storage slots [first_slot, first_slot + n_entries); bytes_per_checkpoint is
    // what one holds (for the statistics).
    CheckpointStore(int32_t first_slot, int32_t n_entries, int64_t bytes_per_checkpoint);

    int32_t capacity() const { return int32_t(hash_.size()); }
    int32_t size() const { return int32_t(by_hash_.size()); }   // named (restorable) entries
    int64_t bytes_per_checkpoint() const { return bytes_; }
    int64_t bytes_used() const { return int64_t(size()) * bytes_; }
    int64_t n_saved() const { return n_saved_; }   // checkpoints written since construction

    bool contains(uint64_t hash) const { return by_hash_.contains(hash); }
    // A storage slot to write a checkpoint into, then name with commit() (or drop with
    // abandon()): the entry named `replace` if present (a sequence moving its own latest
    // checkpoint forward), else a free one, else the least recently used. Whatever it held is
    // forgotten now. nullopt if every entry is being written.
    std::optional<int32_t> begin(uint64_t replace = 0);
    // Names a written entry (if `hash` is already named elsewhere, this one is freed instead).
    void commit(int32_t slot, uint64_t hash);
    void abandon(int32_t slot);
    // Saves `slot`'s state under `hash` now (begin + copy + commit); false if nothing was
    // written (already present — then marked recently used — or no entry free).
    bool save(uint64_t hash, CacheStorage& storage, int32_t slot, uint64_t replace = 0);
    // Copies the checkpoint `hash` into `slot` and marks it recently used; false if absent.
    bool restore(uint64_t hash, CacheStorage& storage, int32_t slot);

private:
    int32_t entry(int32_t slot) const { return slot - first_; }
    void touch(int32_t e) { stamp_[size_t(e)] = ++clock_; }

    int32_t first_;
    int64_t bytes_;
    std::vector<uint64_t> hash_;     // entry → hash (0: free or being written)
    std::vector<uint64_t> stamp_;    // entry → last use
    std::vector<uint8_t> writing_;   // entry → between begin() and commit()/abandon()
    uint64_t clock_ = 0;
    int64_t n_saved_ = 0;
    HashIndex by_hash_;
};

}   // namespace kimi
