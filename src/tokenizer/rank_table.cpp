// RankTable implementation: multiply-mix hash of (first 8 bytes, length, rest), linear
// probing, grown at 50% load.
#include "tokenizer/rank_table.h"

#include <atomic>

namespace kimi::tok {
namespace {

inline uint64_t mix(uint64_t a, uint64_t b) {
    const __uint128_t r = static_cast<__uint128_t>(a) * b;
    return uint64_t(r) ^ uint64_t(r >> 64);
}
constexpr uint64_t kK0 = 0xa0761d6478bd642full, kK1 = 0xe7037ed1a0b428dbull, kK2 = 0x8ebc6af09c88c6e3ull;

std::atomic<uint64_t> g_generation{1};

}   // namespace

RankTable::RankTable() : generation_(g_generation.fetch_add(1)) {
    for (auto& r : byte_rank_) r = kNoRank;
}

uint64_t RankTable::hash(uint64_t head, const unsigned char* p, size_t n) {
    uint64_t seed = kK0;
    for (size_t i = 8; i < n; i += 8) {
        uint64_t w = 0;
        std::memcpy(&w, p + i, n - i < 8 ? n - i : 8);
        seed = mix(w ^ kK1, seed ^ kK2);
    }
    return mix(head ^ kK1, seed ^ (uint64_t(n) * kK2));
}

void RankTable::rehash(size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
        if (s.rank == kNoRank) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(pool_.data() + off_[s.rank]);
        size_t i = size_t(hash(s.head, p, s.len)) & mask_;
        while (slots_[i].rank != kNoRank) i = (i + 1) & mask_;
        slots_[i] = s;
    }
}

void RankTable::reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    if (cap > slots_.size()) rehash(cap);
}

bool RankTable::insert(std::string_view bytes, uint32_t rank) {
    if (rank == kNoRank || rank == kUnused || has_rank(rank)) return false;
    if (find(bytes) != kNoRank) return false;
    if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const uint64_t head = load_head(p, bytes.size());
    size_t i = size_t(hash(head, p, bytes.size())) & mask_;
    while (slots_[i].rank != kNoRank) i = (i + 1) & mask_;
    if (rank >= len_.size()) {
        off_.resize(size_t(rank) + 1, 0);
        len_.resize(size_t(rank) + 1, kUnused);
    }
    off_[rank] = uint32_t(pool_.size());
    len_[rank] = uint32_t(bytes.size());
    pool_.append(bytes);
    slots_[i] = Slot{head, rank, uint32_t(bytes.size())};
    ++count_;
    if (bytes.size() == 1) byte_rank_[p[0]] = rank;
    if (bytes.size() == 2) {
        if (pair2_.empty()) pair2_.assign(65536, kNoRank);
        pair2_[(size_t(p[0]) << 8) | p[1]] = rank;
    }
    generation_ = g_generation.fetch_add(1);
    return true;
}

}   // namespace kimi::tok
