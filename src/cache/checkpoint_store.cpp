// CheckpointStore implementation (see checkpoint_store.h). Choosing an entry scans the stamps
// (O(capacity)): checkpoints are taken at most once per block boundary of a sequence, and each
// copies a whole recurrent state, which dwarfs the scan.
#include "cache/checkpoint_store.h"

#include <algorithm>

#include "core/error.h"

namespace kimi {

CheckpointStore::CheckpointStore(int32_t first_slot, int32_t n_entries, int64_t bytes_per_checkpoint)
    : first_(first_slot),
      bytes_(bytes_per_checkpoint),
      hash_(size_t(std::max(n_entries, 0)), 0),
      stamp_(size_t(std::max(n_entries, 0)), 0),
      writing_(size_t(std::max(n_entries, 0)), 0),
      by_hash_(std::max(n_entries, 0)) {}

std::optional<int32_t> CheckpointStore::begin(uint64_t replace) {
    int32_t e = -1;
    if (const auto r = by_hash_.find(replace)) e = *r;   // named, so not being written
    for (int32_t i = 0; e < 0 && i < capacity(); ++i)
        if (hash_[size_t(i)] == 0 && !writing_[size_t(i)]) e = i;
    if (e < 0)   // full: the least recently used goes
        for (int32_t i = 0; i < capacity(); ++i)
            if (!writing_[size_t(i)] && (e < 0 || stamp_[size_t(i)] < stamp_[size_t(e)])) e = i;
    if (e < 0) return std::nullopt;
    by_hash_.erase(hash_[size_t(e)]);
    hash_[size_t(e)] = 0;
    writing_[size_t(e)] = 1;
    return first_ + e;
}

void CheckpointStore::commit(int32_t slot, uint64_t hash) {
    const int32_t e = entry(slot);
    KIMI_CHECK(e >= 0 && e < capacity() && writing_[size_t(e)] && hash != 0, "checkpoint commit");
    writing_[size_t(e)] = 0;
    ++n_saved_;
    if (const auto other = by_hash_.find(hash)) {   // someone named the same prefix first
        touch(*other);
        stamp_[size_t(e)] = 0;
        return;
    }
    hash_[size_t(e)] = hash;
    by_hash_.insert(hash, e);
    touch(e);
}

void CheckpointStore::abandon(int32_t slot) {
    const int32_t e = entry(slot);
    KIMI_CHECK(e >= 0 && e < capacity() && writing_[size_t(e)], "checkpoint abandon");
    writing_[size_t(e)] = 0;
    stamp_[size_t(e)] = 0;
}

bool CheckpointStore::save(uint64_t hash, CacheStorage& storage, int32_t slot, uint64_t replace) {
    KIMI_CHECK(hash != 0, "checkpoint hash 0");
    if (const auto e = by_hash_.find(hash)) {
        touch(*e);
        return false;
    }
    const auto dst = begin(replace);
    if (!dst) return false;
    storage.copy_slot(slot, *dst);
    commit(*dst, hash);
    return true;
}

bool CheckpointStore::restore(uint64_t hash, CacheStorage& storage, int32_t slot) {
    const auto e = by_hash_.find(hash);
    if (!e) return false;
    storage.copy_slot(first_ + *e, slot);
    touch(*e);
    return true;
}

}   // namespace kimi
