// Byte-pair merge (see bpe.h). Parts are tracked with their token ids, so the rank of an
// adjacent pair (= the rank of its concatenated bytes, tiktoken's rule) can come from a
// two-byte table or a small per-thread cache keyed by the two ids before the byte-string
// hash lookup. Short pieces keep tiktoken's parts array and scan it for the minimum; long
// pieces use a linked list and a binary heap of (rank, start) with lazy invalidation, so
// ties go leftmost in both and the results are the same.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <functional>

#include "core/error.h"

namespace kimi::tok {
namespace {

constexpr size_t kLargePiece = 64;   // bytes; tiktoken switches at 100, results are identical

// Direct-mapped cache (left id, right id) -> rank of the joined bytes.
class PairCache {
public:
    uint32_t get(const RankTable& t, uint32_t a, uint32_t b, const unsigned char* p, size_t len) {
        if (gen_ != t.generation()) {
            entries_.assign(kSize, Entry{kNoRank, kNoRank, kNoRank});
            gen_ = t.generation();
        }
        const uint64_t h = (uint64_t(a) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(b) * 0xC2B2AE3D27D4EB4Full);
        Entry& e = entries_[size_t(h >> (64 - kBits))];
        if (e.a == a && e.b == b) return e.r;
        const uint32_t r = t.find(p, len);
        e = Entry{a, b, r};
        return r;
    }

private:
    static constexpr int kBits = 15;
    static constexpr size_t kSize = size_t(1) << kBits;
    struct Entry {
        uint32_t a, b, r;
    };
    uint64_t gen_ = 0;
    std::vector<Entry> entries_;
};

thread_local PairCache t_cache;

// Rank of the pair (a at s[from, mid), b at s[mid, to)). Without kCache (tables still being
// built, as in the synthetic writer) it always looks the bytes up.
template <bool kCache>
inline uint32_t join_rank(const RankTable& t, const unsigned char* s, size_t from, size_t to, uint32_t a, uint32_t b) {
    if (to - from == 2) return t.pair_rank(s[from], s[from + 1]);
    if constexpr (kCache) return t_cache.get(t, a, b, s + from, to - from);
    return t.find(s + from, to - from);
}

template <bool kCache>
void merge_small(const unsigned char* s, size_t n, const RankTable& ranks, std::vector<int32_t>& out) {
    uint32_t start[kLargePiece + 2], tok[kLargePiece + 1], rank[kLargePiece + 1];
    size_t m = n;   // parts; start[m] == n
    for (size_t i = 0; i < n; ++i) {
        start[i] = uint32_t(i);
        tok[i] = ranks.byte_rank(s[i]);
        rank[i] = i + 1 < n ? ranks.pair_rank(s[i], s[i + 1]) : kNoRank;
    }
    start[n] = uint32_t(n);
    while (m > 1) {
        // Lowest (rank, index): branch-free, so ties go to the leftmost pair.
        uint64_t key = ~uint64_t(0);
        for (size_t i = 0; i + 1 < m; ++i) {
            const uint64_t k = (uint64_t(rank[i]) << 32) | i;
            key = k < key ? k : key;
        }
        const auto best = uint32_t(key >> 32);
        if (best == kNoRank) break;
        const auto bi = size_t(uint32_t(key));
        // Join parts bi and bi+1 into token `best`, drop part bi+1, refresh the two pair ranks.
        tok[bi] = best;
        for (size_t i = bi + 1; i < m; ++i) {
            start[i] = start[i + 1];
            tok[i] = tok[i + 1];
            rank[i] = rank[i + 1];
        }
        --m;
        rank[bi] = bi + 1 < m ? join_rank<kCache>(ranks, s, start[bi], start[bi + 2], tok[bi], tok[bi + 1]) : kNoRank;
        if (bi > 0) rank[bi - 1] = join_rank<kCache>(ranks, s, start[bi - 1], start[bi + 1], tok[bi - 1], tok[bi]);
    }
    for (size_t i = 0; i < m; ++i) out.push_back(int32_t(tok[i]));
}

struct LargeScratch {
    std::vector<uint32_t> next, prev, tok, rank;
    std::vector<uint64_t> heap;   // (rank << 32 | node): min-heap, ties to the leftmost node
};

template <bool kCache>
void merge_large(const unsigned char* s, size_t n, const RankTable& ranks, std::vector<int32_t>& out) {
    thread_local LargeScratch sc;
    // Node i covers s[i .. next[i]); node n is the end sentinel; rank[i] is the rank of node i
    // joined with its successor (kNoRank if that is not a token, kDead once i is merged away).
    constexpr uint32_t kDead = kNoRank - 1;
    auto& next = sc.next;
    auto& prev = sc.prev;
    auto& tok = sc.tok;
    auto& rank = sc.rank;
    auto& heap = sc.heap;
    next.resize(n + 1);
    prev.resize(n + 1);
    tok.resize(n + 1);
    rank.assign(n + 1, kNoRank);
    heap.clear();
    for (size_t i = 0; i <= n; ++i) {
        next[i] = uint32_t(i + 1);
        prev[i] = uint32_t(i == 0 ? 0 : i - 1);
        tok[i] = i < n ? ranks.byte_rank(s[i]) : kNoRank;
    }
    auto pair_rank = [&](uint32_t i) -> uint32_t {
        const uint32_t j = next[i];
        if (j >= n) return kNoRank;
        return join_rank<kCache>(ranks, s, i, next[j], tok[i], tok[j]);
    };
    auto push = [&](uint32_t r, uint32_t i) {
        heap.push_back((uint64_t(r) << 32) | i);
        std::push_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    };
    for (uint32_t i = 0; i + 1 < n; ++i) {
        rank[i] = ranks.pair_rank(s[i], s[i + 1]);
        if (rank[i] != kNoRank) heap.push_back((uint64_t(rank[i]) << 32) | i);
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
        const uint64_t top = heap.back();
        heap.pop_back();
        const auto r = uint32_t(top >> 32), i = uint32_t(top);
        if (rank[i] != r) continue;   // stale entry (node merged away or its pair changed)
        const uint32_t j = next[i];
        tok[i] = r;
        rank[j] = kDead;
        next[i] = next[j];
        if (next[j] <= n) prev[next[j]] = i;
        rank[i] = pair_rank(i);
        if (rank[i] != kNoRank) push(rank[i], i);
        if (i > 0) {
            const uint32_t p = prev[i];
            rank[p] = pair_rank(p);
            if (rank[p] != kNoRank) push(rank[p], p);
        }
    }
    for (uint32_t i = 0; i < n; i = next[i]) out.push_back(int32_t(tok[i]));
    // A huge piece (a 16 MiB "word") must not leave its scratch (~30 bytes per byte) behind in
    // every server thread that ever saw one: past 1 Mi entries the scratch is released.
    constexpr size_t kKeepEntries = size_t(1) << 20;
    if (next.capacity() > kKeepEntries) sc = LargeScratch{};
}

}   // namespace

void bpe_merge(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out) {
    const auto* s = reinterpret_cast<const unsigned char*>(piece.data());
    for (unsigned char c : piece) KIMI_CHECK(ranks.byte_rank(c) != kNoRank, "bpe: a byte is not a token");
    if (piece.size() <= kLargePiece)
        merge_small<false>(s, piece.size(), ranks, out);
    else
        merge_large<false>(s, piece.size(), ranks, out);
}

void bpe_encode_piece(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out) {
    const uint32_t whole = ranks.find(piece);
    if (whole != kNoRank) {
        out.push_back(int32_t(whole));
        return;
    }
    const auto* s = reinterpret_cast<const unsigned char*>(piece.data());
    if (piece.size() <= kLargePiece)
        merge_small<true>(s, piece.size(), ranks, out);
    else
        merge_large<true>(s, piece.size(), ranks, out);
}

}   // namespace kimi::tok
