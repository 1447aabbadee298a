// BlockPool and StatePool (see block_pool.h). Misuse (double free, unknown id) is a
// programmer error and aborts.
#include "cache/block_pool.h"

#include "core/error.h"

namespace kimi {

BlockPool::BlockPool(int32_t n_blocks)
    : ref_(size_t(n_blocks), 0),
      hash_(size_t(n_blocks), 0),
      by_hash_(n_blocks),
      prev_(size_t(n_blocks), -1),
      next_(size_t(n_blocks), -1) {
    free_.reserve(size_t(n_blocks));
    for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);   // hands out 0, 1, 2, ... first
}

std::optional<int32_t> BlockPool::allocate() {
    int32_t b = -1;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else if (head_ >= 0) {   // evict the least recently released cached block
        b = head_;
        lru_remove(b);
        forget(b);
    } else {
        return std::nullopt;
    }
    ref_[size_t(b)] = 1;
    return b;
}

void BlockPool::retain(int32_t block) {
    KIMI_CHECK(block >= 0 && block < n_total() && (ref_[size_t(block)] > 0 || hash_[size_t(block)] != 0),
               "retain of a free block");
    if (ref_[size_t(block)] == 0) lru_remove(block);
    ++ref_[size_t(block)];
}

void BlockPool::release(int32_t block) {
    KIMI_CHECK(block >= 0 && block < n_total() && ref_[size_t(block)] > 0, "release of a free block");
    if (--ref_[size_t(block)] > 0) return;
    if (hash_[size_t(block)] != 0)
        lru_push(block);
    else
        free_.push_back(block);
}

void BlockPool::set_hash(int32_t block, uint64_t hash) {
    KIMI_CHECK(block >= 0 && block < n_total() && ref_[size_t(block)] > 0 && hash != 0, "set_hash of a free block");
    if (hash_[size_t(block)] != 0 || !by_hash_.insert(hash, block)) return;
    hash_[size_t(block)] = hash;
}

std::optional<int32_t> BlockPool::find(uint64_t hash) const { return by_hash_.find(hash); }

void BlockPool::forget(int32_t b) {
    by_hash_.erase(hash_[size_t(b)]);
    hash_[size_t(b)] = 0;
}

void BlockPool::lru_push(int32_t b) {
    prev_[size_t(b)] = tail_;
    next_[size_t(b)] = -1;
    if (tail_ >= 0)
        next_[size_t(tail_)] = b;
    else
        head_ = b;
    tail_ = b;
    ++n_cached_;
}

void BlockPool::lru_remove(int32_t b) {
    const int32_t p = prev_[size_t(b)], n = next_[size_t(b)];
    if (p >= 0)
        next_[size_t(p)] = n;
    else
        head_ = n;
    if (n >= 0)
        prev_[size_t(n)] = p;
    else
        tail_ = p;
    prev_[size_t(b)] = next_[size_t(b)] = -1;
    --n_cached_;
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

}   // namespace kimi
