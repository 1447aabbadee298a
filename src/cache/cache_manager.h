// CacheManager: the only cache object the scheduler talks to. Per request: a block table
// (MLA blocks, shared by all MLA layers) and one state slot (all KDA layers). Integers only.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/block_pool.h"

namespace kimi {

class CacheManager {
public:
    CacheManager(int32_t n_blocks, int32_t block_size, int32_t n_slots, int32_t max_blocks_per_seq);

    int32_t blocks_for(int64_t n_tokens) const { return int32_t((n_tokens + block_size_ - 1) / block_size_); }
    // Could `id` (new or running) hold n_total_tokens tokens after allocating what it lacks?
    bool can_allocate(uint64_t id, int64_t n_total_tokens) const;
    // Grows the block table to cover n_total_tokens and acquires the slot on first use.
    // Returns false (and changes nothing) if the pools cannot supply it.
    bool allocate(uint64_t id, int64_t n_total_tokens);
    void free(uint64_t id);   // blocks + slot back to the pools

    bool has(uint64_t id) const { return seqs_.count(id) != 0; }
    std::span<const int32_t> block_table(uint64_t id) const;
    int32_t state_slot(uint64_t id) const;

    int32_t block_size() const { return block_size_; }
    int32_t max_blocks_per_seq() const { return max_blocks_; }
    const BlockPool& blocks() const { return blocks_; }
    const StatePool& slots() const { return slots_; }

private:
    struct Seq {
        std::vector<int32_t> blocks;
        int32_t slot = -1;
    };
    int32_t block_size_, max_blocks_;
    BlockPool blocks_;
    StatePool slots_;
    std::unordered_map<uint64_t, Seq> seqs_;
};

}  // namespace kimi
