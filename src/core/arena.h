// Arena: bump allocator for the activations of one forward step. reset() at the start of a
// step returns everything; memory is kept, so once the arena has grown to a step's high-water
// mark a step performs no heap allocation at all. Blocks are 64-byte aligned.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace kimi {

class Arena {
public:
    explicit Arena(size_t initial_bytes = size_t(1) << 20);
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    void* alloc_bytes(size_t n);
    Tensor alloc(DType t, std::initializer_list<int64_t> dims);
    Tensor alloc_f32(std::initializer_list<int64_t> dims) { return alloc(DType::kF32, dims); }

    // Frees everything allocated since the last reset. If the last step needed more than one
    // block, the blocks are merged into one of the high-water size so later steps fit in it;
    // that block is touched here, so its pages fault in between steps, not during one.
    // Blocks of 2 MiB and more are 2 MiB-aligned and asked for transparent huge pages.
    void reset();

private:
    struct Free {
        void operator()(std::byte* p) const;
    };
    struct Block {
        std::unique_ptr<std::byte[], Free> raw;
        std::byte* base = nullptr;
        size_t size = 0;
    };
    void add_block(size_t min_bytes, bool touch = false);

    std::vector<Block> blocks_;
    size_t used_ = 0;         // bytes used in blocks_.back()
    size_t step_total_ = 0;   // bytes requested since reset
    size_t high_water_ = 0;
};

}   // namespace kimi
