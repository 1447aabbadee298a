// RankTable: token bytes <-> rank (= token id = merge priority), the vocabulary of a tiktoken
// BPE. An open-addressing hash table keyed by byte strings; each slot keeps the token's first
// 8 bytes and its length, so most lookups touch one cache line. All bytes live in one pool.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace kimi::tok {

constexpr uint32_t kNoRank = 0xFFFFFFFFu;

class RankTable {
public:
    RankTable();
    // Adds bytes with the given rank. Returns false if the bytes are already present or the
    // rank is already used (nothing is changed then).
    bool insert(std::string_view bytes, uint32_t rank);

    uint32_t find(const unsigned char* p, size_t n) const {
        if (slots_.empty()) return kNoRank;
        const uint64_t head = load_head(p, n);
        const uint64_t h = hash(head, p, n);
        for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.rank == kNoRank) return kNoRank;
            if (s.head == head && s.len == n &&
                (n <= 8 || std::memcmp(pool_.data() + off_[s.rank] + 8, p + 8, n - 8) == 0))
                return s.rank;
        }
    }
    uint32_t find(std::string_view b) const { return find(reinterpret_cast<const unsigned char*>(b.data()), b.size()); }

    // Rank of a single byte / of a two-byte token (kNoRank if absent): plain table reads.
    uint32_t byte_rank(unsigned char b) const { return byte_rank_[b]; }
    uint32_t pair_rank(unsigned char a, unsigned char b) const {
        return pair2_.empty() ? kNoRank : pair2_[(size_t(a) << 8) | b];
    }
    // Changes whenever the table changes; identifies its contents for caches keyed by rank.
    uint64_t generation() const { return generation_; }

    std::string_view bytes(uint32_t rank) const { return std::string_view(pool_.data() + off_[rank], len_[rank]); }
    bool has_rank(uint32_t rank) const { return rank < len_.size() && len_[rank] != kUnused; }
    size_t size() const { return count_; }
    void reserve(size_t n);

private:
    struct Slot {
        uint64_t head = 0;   // first min(8, len) bytes, little-endian, zero-padded
        uint32_t rank = kNoRank;
        uint32_t len = 0;
    };
    // The first min(8, n) bytes of p packed into a word (never reads outside p[0..n)).
    static uint64_t load_head(const unsigned char* p, size_t n) {
        uint64_t v = 0;
        if (n >= 8) {
            std::memcpy(&v, p, 8);
        } else if (n >= 4) {
            uint32_t lo, hi;
            std::memcpy(&lo, p, 4);
            std::memcpy(&hi, p + n - 4, 4);
            v = uint64_t(lo) | (uint64_t(hi) << ((n - 4) * 8));
        } else {
            for (size_t i = 0; i < n; ++i) v |= uint64_t(p[i]) << (8 * i);
        }
        return v;
    }
    static uint64_t hash(uint64_t head, const unsigned char* p, size_t n);
    void rehash(size_t capacity);
    static constexpr uint32_t kUnused = 0xFFFFFFFFu;

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t count_ = 0;
    uint32_t byte_rank_[256];
    std::vector<uint32_t> pair2_;
    uint64_t generation_;
    std::string pool_;
    std::vector<uint32_t> off_;   // by rank
    std::vector<uint32_t> len_;   // by rank; kUnused for a rank not present
};

}   // namespace kimi::tok
