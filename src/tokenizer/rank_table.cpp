// RankTable implementation: a wyhash-style multiply-mix hash of the bytes, linear probing,
// grown at 50% load.
#include "tokenizer/rank_table.h"

#include <cstring>

namespace kimi::tok {
namespace {

inline uint64_t mix(uint64_t a, uint64_t b) {
    const __uint128_t r = static_cast<__uint128_t>(a) * b;
    return uint64_t(r) ^ uint64_t(r >> 64);
}
inline uint64_t load8(const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline uint64_t load4(const unsigned char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
constexpr uint64_t kK0 = 0xa0761d6478bd642full, kK1 = 0xe7037ed1a0b428dbull, kK2 = 0x8ebc6af09c88c6e3ull;

}  // namespace

uint64_t RankTable::hash(const unsigned char* p, size_t n) {
    uint64_t a = 0, b = 0, seed = kK0;
    if (n <= 16) {
        if (n >= 4) {
            const size_t step = (n >> 3) << 2;
            a = (load4(p) << 32) | load4(p + step);
            b = (load4(p + n - 4) << 32) | load4(p + n - 4 - step);
        } else if (n > 0) {
            a = (uint64_t(p[0]) << 16) | (uint64_t(p[n >> 1]) << 8) | p[n - 1];
        }
    } else {
        size_t i = n;
        const unsigned char* q = p;
        while (i > 16) {
            seed = mix(load8(q) ^ kK1, load8(q + 8) ^ seed);
            q += 16;
            i -= 16;
        }
        a = load8(p + n - 16);
        b = load8(p + n - 8);
    }
    return mix(kK1 ^ n, mix(a ^ kK1, b ^ seed ^ kK2));
}

void RankTable::reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    if (cap <= slots_.size()) return;
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
        if (s.rank == kNoRank) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(pool_.data() + off_[s.rank]);
        const uint64_t h = hash(p, len_[s.rank]);
        size_t i = size_t(h) & mask_;
        while (slots_[i].rank != kNoRank) i = (i + 1) & mask_;
        slots_[i] = s;
    }
}

void RankTable::grow() { reserve(slots_.empty() ? 8 : slots_.size()); }

bool RankTable::insert(std::string_view bytes, uint32_t rank) {
    if (rank == kNoRank) return false;
    if (has_rank(rank)) return false;
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const uint64_t h = hash(p, bytes.size());
    const uint32_t tag = uint32_t(h >> 32);
    size_t i = size_t(h) & mask_;
    for (;; i = (i + 1) & mask_) {
        const Slot& s = slots_[i];
        if (s.rank == kNoRank) break;
        if (s.tag == tag && len_[s.rank] == bytes.size() && equal(pool_.data() + off_[s.rank], p, bytes.size()))
            return false;
    }
    if (rank >= len_.size()) {
        off_.resize(size_t(rank) + 1, 0);
        len_.resize(size_t(rank) + 1, kUnused);
    }
    off_[rank] = uint32_t(pool_.size());
    len_[rank] = uint32_t(bytes.size());
    pool_.append(bytes);
    slots_[i] = Slot{rank, tag};
    ++count_;
    return true;
}

}  // namespace kimi::tok
