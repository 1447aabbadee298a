// BlockPool: integer ids of the MLA cache blocks, with reference counts and an O(1) free list.
// Prefix caching: a full block can carry the hash of its contents (cache/prefix_hash.h). When
// its last reference goes, a hashed block is not freed but kept as a cached block — found by its
// hash, shared again with a new reference — in least-recently-released order, until allocate()
// runs out of free blocks and evicts the oldest. Bookkeeping only — no tensors.
// ref: vLLM v1 core/block_pool.py (cached blocks, free_block_queue), nano-vllm block_manager.py.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "cache/hash_index.h"

namespace kimi {

class BlockPool {
public:
    explicit BlockPool(int32_t n_blocks);

    std::optional<int32_t> allocate();   // ref count 1; a free block, else the oldest cached one (evicted)
    void retain(int32_t block);          // ref count + 1 (a cached block leaves the eviction order)
    void release(int32_t block);         // ref count − 1; at 0: cached if hashed, else free
    // Blocks allocate() can hand out: free plus cached (evictable) ones.
    int32_t n_free() const { return int32_t(free_.size()) + n_cached_; }
    int32_t n_cached() const { return n_cached_; }   // ref count 0, kept for their contents
    int32_t n_total() const { return int32_t(ref_.size()); }
    int32_t ref_count(int32_t block) const { return ref_[size_t(block)]; }

    // Names a full, in-use block by its contents' hash (non-zero). If another block already
    // holds that hash, this one stays unnamed (and is freed normally).
    void set_hash(int32_t block, uint64_t hash);
    uint64_t hash_of(int32_t block) const { return hash_[size_t(block)]; }
    std::optional<int32_t> find(uint64_t hash) const;   // the block holding `hash`, in use or cached

private:
    void lru_push(int32_t b);
    void lru_remove(int32_t b);
    void forget(int32_t b);

    std::vector<int32_t> free_;   // stack of free ids
    std::vector<int32_t> ref_;
    std::vector<uint64_t> hash_;   // 0: not named
    HashIndex by_hash_;
    std::vector<int32_t> prev_, next_;   // the cached blocks, oldest first (−1 ends)
    int32_t head_ = -1, tail_ = -1, n_cached_ = 0;
};

// StatePool: integer ids of the recurrent-state slots (one per running sequence).
class StatePool {
public:
    explicit StatePool(int32_t n_slots);

    std::optional<int32_t> acquire();
    void release(int32_t slot);
    int32_t n_free() const { return int32_t(free_.size()); }
    int32_t n_total() const { return int32_t(used_.size()); }

private:
    std::vector<int32_t> free_;
    std::vector<uint8_t> used_;
};

}   // namespace kimi
