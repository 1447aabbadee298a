// Arena implementation (see arena.h).
#include "core/arena.h"

#include "core/alloc_counter.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kimi {

static constexpr size_t kAlign = 64;
static constexpr size_t kHuge = size_t(2) << 20;   // x86-64 huge page

void Arena::Free::operator()(std::byte* p) const { std::free(p); }

Arena::Arena(size_t initial_bytes) {
    blocks_.reserve(8);
    add_block(initial_bytes);
}

void Arena::add_block(size_t min_bytes, bool touch) {
    Block b;
    b.size = std::max(min_bytes, size_t(1) << 16);
    const size_t align = b.size >= kHuge ? kHuge : kAlign;
    const size_t bytes = (b.size + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (!p) throw std::bad_alloc();
    count_allocation();
    if (align == kHuge) ::madvise(p, bytes, MADV_HUGEPAGE);   // a hint; fine if refused
    if (touch) std::memset(p, 0, bytes);
    b.raw.reset(static_cast<std::byte*>(p));
    b.base = b.raw.get();
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
        add_block(high_water_, true);
    }
    used_ = 0;
    step_total_ = 0;
}

}   // namespace kimi
