// BlockPool and StatePool (see block_pool.h). Misuse (double free, unknown id) is a
// programmer error and aborts.
#include "cache/block_pool.h"

#include "core/error.h"

namespace kimi {

BlockPool::BlockPool(int32_t n_blocks) : ref_(size_t(n_blocks), 0) {
    free_.reserve(size_t(n_blocks));
    for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);   // hands out 0, 1, 2, ... first
}

std::optional<int32_t> BlockPool::allocate() {
    if (free_.empty()) return std::nullopt;
    const int32_t b = free_.back();
    free_.pop_back();
    ref_[size_t(b)] = 1;
    return b;
}

void BlockPool::retain(int32_t block) {
    KIMI_CHECK(block >= 0 && block < n_total() && ref_[size_t(block)] > 0, "retain of a free block");
    ++ref_[size_t(block)];
}

void BlockPool::release(int32_t block) {
    KIMI_CHECK(block >= 0 && block < n_total() && ref_[size_t(block)] > 0, "release of a free block");
    if (--ref_[size_t(block)] == 0) free_.push_back(block);
}

StatePool::StatePool(int32_t n_slots) : used_(size_t(n_slots), 0) {
    free_.reserve(size_t(n_slots));
    for (int32_t s = n_slots - 1; s >= 0; --s) free_.push_back(s);
}

std::optional<int32_t> StatePool::acquire() {
    if (free_.empty()) return std::nullopt;
    const int32_t s = free_.back();
    free_.pop_back();
    used_[size_t(s)] = 1;
    return s;
}

void StatePool::release(int32_t slot) {
    KIMI_CHECK(slot >= 0 && slot < n_total() && used_[size_t(slot)], "release of a free state slot");
    used_[size_t(slot)] = 0;
    free_.push_back(slot);
}

}  // namespace kimi
