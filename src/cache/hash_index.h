// HashIndex: a fixed-capacity map from a non-zero 64-bit hash to an int32 id, with no heap
// allocation after construction (open addressing, linear probing, backward-shift deletion).
// The prefix cache names blocks and checkpoints while steps run; std::unordered_map would
// allocate a node per insert on the hot path.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace kimi {

class HashIndex {
public:
    explicit HashIndex(int64_t max_entries);

    int64_t size() const { return size_; }
    std::optional<int32_t> find(uint64_t key) const;
    bool contains(uint64_t key) const { return find(key).has_value(); }
    // Inserts key → value; false (and no change) if the key is present. At most max_entries.
    bool insert(uint64_t key, int32_t value);
    void erase(uint64_t key);   // no-op if absent

private:
    size_t home(uint64_t key) const { return size_t((key * 0x9e3779b97f4a7c15ull) >> shift_); }
    std::vector<uint64_t> keys_;   // 0: empty
    std::vector<int32_t> values_;
    size_t mask_ = 0;
    int shift_ = 64;
    int64_t size_ = 0, max_ = 0;
};

}   // namespace kimi
