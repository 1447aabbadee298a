// Arena implementation (see arena.h).
#include "core/arena.h"

#include <algorithm>

namespace kimi {

static constexpr size_t kAlign = 64;

Arena::Arena(size_t initial_bytes) {
    blocks_.reserve(8);
    add_block(initial_bytes);
}

void Arena::add_block(size_t min_bytes) {
    Block b;
    b.size = std::max(min_bytes, size_t(1) << 16);
    b.raw.reset(new std::byte[b.size + kAlign]);
    const uintptr_t p = reinterpret_cast<uintptr_t>(b.raw.get());
    b.base = b.raw.get() + ((kAlign - p % kAlign) % kAlign);
    blocks_.push_back(std::move(b));
    used_ = 0;
}

void* Arena::alloc_bytes(size_t n) {
    n = (n + kAlign - 1) / kAlign * kAlign;
    if (n == 0) n = kAlign;
    step_total_ += n;
    if (used_ + n > blocks_.back().size) add_block(std::max(n, blocks_.back().size * 2));
    void* p = blocks_.back().base + used_;
    used_ += n;
    return p;
}

Tensor Arena::alloc(DType t, std::initializer_list<int64_t> dims) {
    Tensor x(nullptr, t, dims);
    x.data = alloc_bytes(x.nbytes());
    return x;
}

void Arena::reset() {
    high_water_ = std::max(high_water_, step_total_);
    if (blocks_.size() > 1) {
        blocks_.clear();
        add_block(high_water_);
    }
    used_ = 0;
    step_total_ = 0;
}

}  // namespace kimi
