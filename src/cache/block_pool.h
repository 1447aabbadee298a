// BlockPool: integer ids of the MLA cache blocks, with reference counts (ready for prefix
// sharing) and an O(1) free list. Bookkeeping only — no tensors.
// ref: vLLM v1 core/block_pool.py, nano-vllm block_manager.py.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace kimi {

class BlockPool {
public:
    explicit BlockPool(int32_t n_blocks);

    std::optional<int32_t> allocate();   // ref count 1
    void retain(int32_t block);          // ref count + 1
    void release(int32_t block);         // ref count − 1; back to the free list at 0
    int32_t n_free() const { return int32_t(free_.size()); }
    int32_t n_total() const { return int32_t(ref_.size()); }
    int32_t ref_count(int32_t block) const { return ref_[size_t(block)]; }

private:
    std::vector<int32_t> free_;   // stack of free ids
    std::vector<int32_t> ref_;
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

}  // namespace kimi
