// Byte-pair merge (see bpe.h). The short version keeps tiktoken's parts array (start, rank of
// the pair starting here) and scans it for the minimum; the long version keeps a linked list
// and a binary heap with lazy invalidation, ordered by (rank, start) so ties go leftmost.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "core/error.h"

namespace kimi::tok {
namespace {

constexpr size_t kLargePiece = 128;   // bytes; tiktoken switches at 100, results are identical

struct Part {
    uint32_t start;
    uint32_t rank;
};

void merge_small(const unsigned char* s, size_t n, const RankTable& ranks, std::vector<int32_t>& out) {
    Part buf[kLargePiece + 1];
    Part* parts = buf;
    size_t m = n + 1;   // parts[m-1] is the end sentinel
    auto pair_rank = [&](size_t i) -> uint32_t {   // rank of parts[i] .. parts[i+2]
        if (i + 2 >= m) return kNoRank;
        return ranks.find(s + parts[i].start, parts[i + 2].start - parts[i].start);
    };
    for (size_t i = 0; i < m; ++i) parts[i] = Part{uint32_t(i), kNoRank};
    for (size_t i = 0; i + 2 < m; ++i) parts[i].rank = pair_rank(i);
    while (m > 2) {
        uint32_t best = kNoRank;
        size_t bi = 0;
        for (size_t i = 0; i + 2 < m; ++i)
            if (parts[i].rank < best) {
                best = parts[i].rank;
                bi = i;
            }
        if (best == kNoRank) break;
        // Merge parts[bi] and parts[bi+1]: drop parts[bi+1], then refresh the two ranks.
        std::copy(parts + bi + 2, parts + m, parts + bi + 1);
        --m;
        parts[bi].rank = pair_rank(bi);
        if (bi > 0) parts[bi - 1].rank = pair_rank(bi - 1);
    }
    for (size_t i = 0; i + 1 < m; ++i) {
        const uint32_t r = ranks.find(s + parts[i].start, parts[i + 1].start - parts[i].start);
        KIMI_CHECK(r != kNoRank, "bpe: part without a rank");
        out.push_back(int32_t(r));
    }
}

void merge_large(const unsigned char* s, size_t n, const RankTable& ranks, std::vector<int32_t>& out) {
    // Node i covers s[start[i] .. start[next[i]]); node n is the end sentinel.
    std::vector<uint32_t> start(n + 1), next(n + 1), prev(n + 1), rank(n + 1, kNoRank);
    for (size_t i = 0; i <= n; ++i) {
        start[i] = uint32_t(i);
        next[i] = uint32_t(i + 1);
        prev[i] = uint32_t(i == 0 ? 0 : i - 1);
    }
    // rank[i]: rank of node i merged with next[i] (kNoRank if not a token or no next).
    auto pair_rank = [&](uint32_t i) -> uint32_t {
        const uint32_t j = next[i];
        if (j >= n) return kNoRank;
        const uint32_t end = next[j] <= n ? start[next[j]] : uint32_t(n);
        return ranks.find(s + start[i], end - start[i]);
    };
    using Entry = std::pair<uint32_t, uint32_t>;   // (rank, node); node index == start byte
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    for (uint32_t i = 0; i + 1 < n; ++i) {
        rank[i] = pair_rank(i);
        if (rank[i] != kNoRank) heap.push({rank[i], i});
    }
    std::vector<bool> dead(n + 1, false);
    while (!heap.empty()) {
        const auto [r, i] = heap.top();
        heap.pop();
        if (dead[i] || rank[i] != r) continue;   // stale
        const uint32_t j = next[i];
        dead[j] = true;
        next[i] = next[j];
        if (next[j] <= n) prev[next[j]] = i;
        rank[i] = pair_rank(i);
        if (rank[i] != kNoRank) heap.push({rank[i], i});
        if (i > 0) {
            const uint32_t p = prev[i];
            rank[p] = pair_rank(p);
            if (rank[p] != kNoRank) heap.push({rank[p], p});
        }
    }
    for (uint32_t i = 0; i < n; i = next[i]) {
        const uint32_t r = ranks.find(s + start[i], start[next[i]] - start[i]);
        KIMI_CHECK(r != kNoRank, "bpe: part without a rank");
        out.push_back(int32_t(r));
    }
}

}  // namespace

void bpe_merge(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out) {
    const auto* s = reinterpret_cast<const unsigned char*>(piece.data());
    if (piece.size() <= kLargePiece)
        merge_small(s, piece.size(), ranks, out);
    else
        merge_large(s, piece.size(), ranks, out);
}

void bpe_encode_piece(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out) {
    const uint32_t whole = ranks.find(piece);
    if (whole != kNoRank) {
        out.push_back(int32_t(whole));
        return;
    }
    bpe_merge(piece, ranks, out);
}

}  // namespace kimi::tok
