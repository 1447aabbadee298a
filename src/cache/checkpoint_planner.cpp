// CheckpointPlanner implementation (see checkpoint_planner.h).
#include "cache/checkpoint_planner.h"

#include <algorithm>
#include <utility>

namespace kimi {

namespace {
// The prompt's own checkpoint positions: its last full block (where a longer prompt that
// starts with it resumes) and the last full block before its last token (where the same prompt
// again resumes: a hit leaves one token to compute); the two differ when the prompt is a whole
// number of blocks.
std::pair<int64_t, int64_t> prompt_positions(int64_t prompt_len, int64_t bs) {
    return {(prompt_len - 1) / bs * bs, prompt_len / bs * bs};
}
}   // namespace

CheckpointPlanner::CheckpointPlanner(CacheManager& cache, CheckpointStore& store, CacheStorage& storage,
                                     int32_t interval)
    : cache_(cache), store_(store), storage_(storage), interval_(interval) {
    captures_.reserve(size_t(store.capacity()));
    capture_hashes_.reserve(size_t(store.capacity()));
}

void CheckpointPlanner::clear() {
    captures_.clear();
    capture_hashes_.clear();
}

// Checkpoint positions inside the chunk (from, end): every multiple of the interval and the
// prompt's positions, in order of position.
bool CheckpointPlanner::plan_chunk(int32_t seq, uint64_t id, int64_t from, int64_t n_tokens, int64_t prompt_len,
                                   const TokenAt& token_at) {
    if (!cache_.prefix_caching() || store_.capacity() == 0) return false;
    const int64_t bs = cache_.block_size(), every = interval_;
    const int64_t end = from + n_tokens;
    const auto [p1, p2] = prompt_positions(prompt_len, bs);
    int64_t extra[2], n_extra = 0;   // the prompt's positions in this chunk, not on the interval
    for (int64_t p : {p1, p2})
        if (p > from && p < end && p % every != 0 && (n_extra == 0 || extra[n_extra - 1] != p)) extra[n_extra++] = p;
    int64_t next = (from / every + 1) * every, k = 0;
    for (;;) {
        const int64_t x = k < n_extra ? extra[k] : INT64_MAX;
        const int64_t at = std::min(next, x);
        if (at >= end) break;
        if (at == x)
            ++k;
        else
            next += every;
        const uint64_t h = cache_.hash_through(id, at / bs, token_at);
        if (h == 0 || store_.contains(h)) continue;
        const auto slot = store_.begin();
        if (!slot) return false;
        captures_.push_back({seq, int32_t(at - from), *slot});
        capture_hashes_.push_back(h);
    }
    return true;
}

void CheckpointPlanner::commit_captures() {
    for (size_t i = 0; i < captures_.size(); ++i) store_.commit(captures_[i].slot, capture_hashes_[i]);
}

uint64_t CheckpointPlanner::save_chunk_end(uint64_t id, int64_t end, int64_t prompt_len, uint64_t tail) {
    if (!cache_.prefix_caching()) return tail;
    const int64_t bs = cache_.block_size();
    if (end == 0 || end % bs != 0) return tail;
    const uint64_t h = cache_.prefix_hash(id, end / bs);
    if (h == 0) return tail;
    const auto [p1, p2] = prompt_positions(prompt_len, bs);
    if (end % interval_ == 0 || end == p1 || end == p2)
        store_.save(h, storage_, cache_.state_slot(id));
    else if (end > prompt_len && store_.save(h, storage_, cache_.state_slot(id), tail))
        return h;
    return tail;
}

}   // namespace kimi
