// HashIndex implementation (see hash_index.h). The table has at least twice as many cells as
// entries, so probes stay short; deletion shifts later entries of the run back (no tombstones).
#include "cache/hash_index.h"

#include "core/error.h"

namespace kimi {

HashIndex::HashIndex(int64_t max_entries) : max_(max_entries) {
    KIMI_CHECK(max_entries >= 0, "HashIndex capacity");
    int bits = 1;
    while ((int64_t(1) << bits) < 2 * max_entries) ++bits;
    keys_.assign(size_t(1) << bits, 0);
    values_.assign(size_t(1) << bits, -1);
    mask_ = (size_t(1) << bits) - 1;
    shift_ = 64 - bits;
}

std::optional<int32_t> HashIndex::find(uint64_t key) const {
    if (key == 0) return std::nullopt;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
        if (keys_[i] == key) return values_[i];
        if (keys_[i] == 0) return std::nullopt;
    }
}

bool HashIndex::insert(uint64_t key, int32_t value) {
    KIMI_CHECK(key != 0, "HashIndex key 0");
    size_t i = home(key);
    for (; keys_[i] != 0; i = (i + 1) & mask_)
        if (keys_[i] == key) return false;
    KIMI_CHECK(size_ < max_, "HashIndex full");
    keys_[i] = key;
    values_[i] = value;
    ++size_;
    return true;
}

void HashIndex::erase(uint64_t key) {
    if (key == 0) return;
    size_t i = home(key);
    while (keys_[i] != key) {
        if (keys_[i] == 0) return;
        i = (i + 1) & mask_;
    }
    // Backward shift: move later entries of the probe run into the hole when their home
    // position does not lie cyclically in (hole, j].
    for (size_t j = (i + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
        const size_t h = home(keys_[j]);
        const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays) continue;
        keys_[i] = keys_[j];
        values_[i] = values_[j];
        i = j;
    }
    keys_[i] = 0;
    values_[i] = -1;
    --size_;
}

}   // namespace kimi
