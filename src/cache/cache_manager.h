// CacheManager: the only cache object the scheduler talks to. Per request: a block table
// (MLA blocks, shared by all MLA layers) and one state slot (all KDA layers). Integers only.
// With prefix caching on, every full block of a request is named by the hash chain of its
// prefix (cache/prefix_hash.h) as it fills, stays in the pool as a cached block after the
// request ends, and a new request whose leading blocks match (hash and token ids) shares them.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include <functional>

#include "cache/block_pool.h"
#include "cache/checkpoint_store.h"

namespace kimi {

// The longest cached prefix of a request: its leading full blocks (in use or cached), their
// chain hashes, and the KDA checkpoint to restore (the hash of the last block).
struct PrefixHit {
    std::vector<int32_t> blocks;
    std::vector<uint64_t> hashes;
    int64_t n_tokens(int32_t block_size) const { return int64_t(blocks.size()) * block_size; }
};

class CacheManager {
public:
    using TokenAt = std::function<uint64_t(int64_t)>;   // token i's prefix-cache key (prefix_hash.h)
    CacheManager(int32_t n_blocks, int32_t block_size, int32_t n_slots, int32_t max_blocks_per_seq);

    int32_t blocks_for(int64_t n_tokens) const { return int32_t((n_tokens + block_size_ - 1) / block_size_); }
    // Could `id` (new or running) hold n_total_tokens tokens after allocating what it lacks?
    bool can_allocate(uint64_t id, int64_t n_total_tokens) const;
    // Grows the block table to cover n_total_tokens and acquires the slot on first use.
    // Returns false (and changes nothing) if the pools cannot supply it.
    bool allocate(uint64_t id, int64_t n_total_tokens);
    void free(uint64_t id);   // blocks + slot back to the pools (hashed blocks stay cached)
    // The blocks past the first n_total_tokens back to the pool (a rejected speculative draft's).
    void shrink(uint64_t id, int64_t n_total_tokens);

    // Prefix caching (off until enabled). `salt` names whatever else shapes the cached values
    // (the activation precision, the latent dtype).
    void enable_prefix_caching(uint64_t salt);
    bool prefix_caching() const { return caching_; }
    // The longest prefix of the n_tokens tokens whose blocks are all cached (token ids checked)
    // and whose last block has a checkpoint in `ckpt`, leaving at least one token to compute.
    PrefixHit match_prefix(const TokenAt& token_at, int64_t n_tokens, const CheckpointStore& ckpt) const;
    // Like allocate() for a new request, starting from the shared blocks of `hit`.
    bool allocate_with_prefix(uint64_t id, const PrefixHit& hit, int64_t n_total_tokens);
    // Names the request's blocks that are full once n_computed tokens are in the cache.
    void commit_full_blocks(uint64_t id, int64_t n_computed, const TokenAt& token_at);
    // The chain hash of the request's first n_blocks blocks (0 if not yet named).
    uint64_t prefix_hash(uint64_t id, int64_t n_blocks) const;
    // The same for blocks not named yet (still being computed): hashed from their token ids,
    // continuing the chain from the last named block. No allocation.
    uint64_t hash_through(uint64_t id, int64_t n_blocks, const TokenAt& token_at);

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
        std::vector<uint64_t> hashes;   // chain hashes of the full blocks named so far
        int32_t slot = -1;
    };
    int32_t block_size_, max_blocks_;
    bool caching_ = false;
    uint64_t salt_ = 0;
    std::vector<uint64_t> block_tokens_;   // [n_blocks, block_size]: the keys a named block holds
    std::vector<uint64_t> ids_scratch_;    // one block's keys, for commit_full_blocks
    BlockPool blocks_;
    StatePool slots_;
    std::unordered_map<uint64_t, Seq> seqs_;
};

}   // namespace kimi
