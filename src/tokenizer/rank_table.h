// RankTable: token bytes <-> rank (= token id = merge priority), the vocabulary of a tiktoken
// BPE. An open-addressing hash table keyed by byte strings, with all token bytes in one pool.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kimi::tok {

constexpr uint32_t kNoRank = 0xFFFFFFFFu;

class RankTable {
public:
    // Adds bytes with the given rank. Returns false if the bytes are already present or the
    // rank is already used (nothing is changed then).
    bool insert(std::string_view bytes, uint32_t rank);

    uint32_t find(const unsigned char* p, size_t n) const {
        if (slots_.empty()) return kNoRank;
        const uint64_t h = hash(p, n);
        const uint32_t tag = uint32_t(h >> 32);
        for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.rank == kNoRank) return kNoRank;
            if (s.tag == tag && len_[s.rank] == n && equal(pool_.data() + off_[s.rank], p, n)) return s.rank;
        }
    }
    uint32_t find(std::string_view b) const {
        return find(reinterpret_cast<const unsigned char*>(b.data()), b.size());
    }

    std::string_view bytes(uint32_t rank) const {
        return std::string_view(pool_.data() + off_[rank], len_[rank]);
    }
    bool has_rank(uint32_t rank) const { return rank < len_.size() && len_[rank] != kUnused; }
    size_t size() const { return count_; }
    uint32_t max_rank_plus_one() const { return uint32_t(len_.size()); }
    void reserve(size_t n);

    static uint64_t hash(const unsigned char* p, size_t n);

private:
    struct Slot {
        uint32_t rank = kNoRank;
        uint32_t tag = 0;
    };
    static bool equal(const char* a, const unsigned char* b, size_t n) {
        for (size_t i = 0; i < n; ++i)
            if (static_cast<unsigned char>(a[i]) != b[i]) return false;
        return true;
    }
    void grow();
    static constexpr uint32_t kUnused = 0xFFFFFFFFu;

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t count_ = 0;
    std::string pool_;
    std::vector<uint32_t> off_;   // by rank
    std::vector<uint32_t> len_;   // by rank; kUnused for a rank not present
};

}  // namespace kimi::tok
