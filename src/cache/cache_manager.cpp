// CacheManager implementation (see cache_manager.h).
#include "cache/cache_manager.h"

#include <algorithm>

#include "cache/prefix_hash.h"
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
        if (caching_) s.hashes.reserve(size_t(max_blocks_));
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

void CacheManager::shrink(uint64_t id, int64_t n_total_tokens) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return;
    Seq& s = it->second;
    const size_t keep = size_t(std::max<int32_t>(blocks_for(n_total_tokens), int32_t(s.hashes.size())));
    while (s.blocks.size() > keep) {
        blocks_.release(s.blocks.back());
        s.blocks.pop_back();
    }
}

void CacheManager::enable_prefix_caching(uint64_t salt) {
    caching_ = true;
    salt_ = salt;
    ids_scratch_.reserve(size_t(block_size_));
    block_tokens_.assign(size_t(blocks_.n_total()) * size_t(block_size_), 0);
}

PrefixHit CacheManager::match_prefix(const TokenAt& token_at, int64_t n_tokens, const CheckpointStore& ckpt) const {
    PrefixHit hit;
    if (!caching_) return hit;
    std::vector<uint64_t> ids(static_cast<size_t>(block_size_));
    uint64_t h = 0;
    size_t best = 0;
    std::vector<int32_t> blocks;
    std::vector<uint64_t> hashes;
    for (int64_t k = 0; (k + 1) * block_size_ <= n_tokens - 1; ++k) {   // keep at least one token to compute
        for (int32_t i = 0; i < block_size_; ++i) ids[size_t(i)] = token_at(k * block_size_ + i);
        h = block_hash(h, ids, salt_);
        const auto b = blocks_.find(h);
        if (!b || !std::equal(ids.begin(), ids.end(), block_tokens_.begin() + int64_t(*b) * block_size_)) break;
        blocks.push_back(*b);
        hashes.push_back(h);
        if (ckpt.contains(h)) best = blocks.size();
    }
    hit.blocks.assign(blocks.begin(), blocks.begin() + int64_t(best));
    hit.hashes.assign(hashes.begin(), hashes.begin() + int64_t(best));
    return hit;
}

bool CacheManager::allocate_with_prefix(uint64_t id, const PrefixHit& hit, int64_t n_total_tokens) {
    if (hit.blocks.empty()) return allocate(id, n_total_tokens);
    if (has(id)) return false;
    const int32_t need = blocks_for(n_total_tokens);
    int32_t revived = 0;   // hit blocks now cached: sharing them takes them out of the evictable count
    for (int32_t b : hit.blocks) revived += blocks_.ref_count(b) == 0;
    if (need > max_blocks_ || need - int32_t(hit.blocks.size()) > blocks_.n_free() - revived || slots_.n_free() == 0)
        return false;
    Seq& s = seqs_[id];
    s.blocks.reserve(size_t(max_blocks_));
    s.slot = *slots_.acquire();
    for (int32_t b : hit.blocks) {
        blocks_.retain(b);
        s.blocks.push_back(b);
    }
    s.hashes.reserve(size_t(max_blocks_));
    s.hashes.assign(hit.hashes.begin(), hit.hashes.end());
    while (int32_t(s.blocks.size()) < need) s.blocks.push_back(*blocks_.allocate());
    return true;
}

void CacheManager::commit_full_blocks(uint64_t id, int64_t n_computed, const TokenAt& token_at) {
    if (!caching_) return;
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return;
    Seq& s = it->second;
    std::vector<uint64_t>& ids = ids_scratch_;   // kept: no allocation per step
    ids.resize(size_t(block_size_));
    for (int64_t k = int64_t(s.hashes.size()); k < n_computed / block_size_ && k < int64_t(s.blocks.size()); ++k) {
        for (int32_t i = 0; i < block_size_; ++i) ids[size_t(i)] = token_at(k * block_size_ + i);
        const uint64_t h = block_hash(s.hashes.empty() ? 0 : s.hashes.back(), ids, salt_);
        const int32_t b = s.blocks[size_t(k)];
        blocks_.set_hash(b, h);
        if (blocks_.hash_of(b) == h)
            std::copy(ids.begin(), ids.end(), block_tokens_.begin() + int64_t(b) * block_size_);
        s.hashes.push_back(h);
    }
}

uint64_t CacheManager::prefix_hash(uint64_t id, int64_t n_blocks) const {
    auto it = seqs_.find(id);
    if (it == seqs_.end() || n_blocks <= 0 || n_blocks > int64_t(it->second.hashes.size())) return 0;
    return it->second.hashes[size_t(n_blocks - 1)];
}

uint64_t CacheManager::hash_through(uint64_t id, int64_t n_blocks, const TokenAt& token_at) {
    auto it = seqs_.find(id);
    if (!caching_ || it == seqs_.end() || n_blocks <= 0) return 0;
    const Seq& s = it->second;
    if (n_blocks <= int64_t(s.hashes.size())) return s.hashes[size_t(n_blocks - 1)];
    uint64_t h = s.hashes.empty() ? 0 : s.hashes.back();
    std::vector<uint64_t>& ids = ids_scratch_;
    ids.resize(size_t(block_size_));
    for (int64_t k = int64_t(s.hashes.size()); k < n_blocks; ++k) {
        for (int32_t i = 0; i < block_size_; ++i) ids[size_t(i)] = token_at(k * block_size_ + i);
        h = block_hash(h, ids, salt_);
    }
    return h;
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

}   // namespace kimi
