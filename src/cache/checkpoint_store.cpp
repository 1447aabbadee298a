// CheckpointStore implementation (see checkpoint_store.h). Eviction scans the entries for the
// oldest stamp: checkpoints are taken once per block boundary at most, so O(capacity) per save
// is small next to copying the state itself.
#include "cache/checkpoint_store.h"

#include <algorithm>

#include "core/error.h"

namespace kimi {

CheckpointStore::CheckpointStore(int64_t bytes_per_checkpoint, int64_t budget_bytes) : floats_(bytes_per_checkpoint / 4) {
    KIMI_CHECK(bytes_per_checkpoint > 0 && bytes_per_checkpoint % 4 == 0, "checkpoint size");
    const int64_t n = std::max<int64_t>(0, budget_bytes) / bytes_per_checkpoint;
    used_.assign(size_t(n), 0);
    stamp_.assign(size_t(n), 0);
    if (n > 0) data_.reset(new float[size_t(n * floats_)]());   // zeroed: its pages fault in now, not during a step
    by_hash_.reserve(size_t(n));
}

void CheckpointStore::touch(int32_t entry) { stamp_[size_t(entry)] = ++clock_; }

void CheckpointStore::save(uint64_t hash, const CacheStorage& storage, int32_t slot) {
    KIMI_CHECK(hash != 0, "checkpoint hash 0");
    if (capacity() == 0) return;
    if (auto it = by_hash_.find(hash); it != by_hash_.end()) return touch(it->second);
    int32_t e = int32_t(std::find(used_.begin(), used_.end(), uint64_t(0)) - used_.begin());
    if (e == capacity()) {   // full: the least recently used goes
        e = int32_t(std::min_element(stamp_.begin(), stamp_.end()) - stamp_.begin());
        by_hash_.erase(used_[size_t(e)]);
    }
    storage.save_slot(slot, data_.get() + int64_t(e) * floats_);
    used_[size_t(e)] = hash;
    by_hash_[hash] = e;
    touch(e);
}

bool CheckpointStore::restore(uint64_t hash, CacheStorage& storage, int32_t slot) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return false;
    storage.load_slot(data_.get() + int64_t(it->second) * floats_, slot);
    touch(it->second);
    return true;
}

}  // namespace kimi
