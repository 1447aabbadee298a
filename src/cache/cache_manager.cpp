// CacheManager implementation (see cache_manager.h).
#include "cache/cache_manager.h"

#include "core/error.h"

namespace kimi {

CacheManager::CacheManager(int32_t n_blocks, int32_t block_size, int32_t n_slots, int32_t max_blocks_per_seq)
    : block_size_(block_size), max_blocks_(max_blocks_per_seq), blocks_(n_blocks), slots_(n_slots) {
    seqs_.reserve(size_t(n_slots) * 2);
}

bool CacheManager::can_allocate(uint64_t id, int64_t n_total_tokens) const {
    const int32_t need = blocks_for(n_total_tokens);
    if (need > max_blocks_) return false;
    auto it = seqs_.find(id);
    const int32_t have = it == seqs_.end() ? 0 : int32_t(it->second.blocks.size());
    const bool need_slot = it == seqs_.end();
    return need - have <= blocks_.n_free() && (!need_slot || slots_.n_free() > 0);
}

bool CacheManager::allocate(uint64_t id, int64_t n_total_tokens) {
    if (!can_allocate(id, n_total_tokens)) return false;
    auto [it, fresh] = seqs_.try_emplace(id);
    Seq& s = it->second;
    if (fresh) {
        s.blocks.reserve(size_t(max_blocks_));
        s.slot = *slots_.acquire();
    }
    const int32_t need = blocks_for(n_total_tokens);
    while (int32_t(s.blocks.size()) < need) s.blocks.push_back(*blocks_.allocate());
    return true;
}

void CacheManager::free(uint64_t id) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return;
    for (int32_t b : it->second.blocks) blocks_.release(b);
    slots_.release(it->second.slot);
    seqs_.erase(it);
}

std::span<const int32_t> CacheManager::block_table(uint64_t id) const {
    auto it = seqs_.find(id);
    KIMI_CHECK(it != seqs_.end(), "block_table of an unknown request");
    return it->second.blocks;
}

int32_t CacheManager::state_slot(uint64_t id) const {
    auto it = seqs_.find(id);
    KIMI_CHECK(it != seqs_.end(), "state_slot of an unknown request");
    return it->second.slot;
}

}  // namespace kimi
