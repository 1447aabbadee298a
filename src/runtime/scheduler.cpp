// Scheduler implementation (see scheduler.h). The whole policy is schedule().
#include "runtime/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace kimi {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::kStop: return "stop";
        case FinishReason::kLength: return "length";
        case FinishReason::kAbort: return "abort";
        case FinishReason::kNone: return "";
    }
    return "";
}

Scheduler::Scheduler(const SchedulerConfig& cfg, CacheManager& cache, const CheckpointStore* ckpt)
    : cfg_(cfg), cache_(cache), ckpt_(ckpt) {
    running_.reserve(size_t(cfg.max_num_seqs));
    finished_.reserve(size_t(cfg.max_num_seqs) * 2);
}

void Scheduler::add(Request* r) {
    r->status = RequestStatus::kWaiting;
    waiting_.push_back(r);
}

void Scheduler::finish(Request* r, FinishReason why) {
    cache_.free(r->id);
    r->status = RequestStatus::kFinished;
    r->finish = why;
    running_.erase(std::remove(running_.begin(), running_.end(), r), running_.end());
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), r), waiting_.end());
}

void Scheduler::preempt(Request* r, ScheduleOutput& out) {
    cache_.free(r->id);
    r->n_computed = 0;
    r->tail_checkpoint = 0;
    r->status = RequestStatus::kWaiting;
    ++r->n_preemptions;
    running_.erase(std::remove(running_.begin(), running_.end(), r), running_.end());
    waiting_.push_front(r);
    out.preempted.push_back(r);
}

void Scheduler::schedule(ScheduleOutput& out) {
    out.clear();
    // Aborts take effect at the next step: free everything first.
    auto reap = [this](auto& queue) {
        for (size_t i = 0; i < queue.size();) {
            Request* r = queue[i];
            if (!r->abort_requested) {
                ++i;
                continue;
            }
            finish(r, FinishReason::kAbort);   // removes r from the queue
            finished_.push_back(r);
        }
    };
    reap(running_);
    reap(waiting_);

    int32_t budget = cfg_.max_num_batched_tokens;
    // 1. Running requests, oldest first.
    for (size_t i = 0; i < running_.size() && budget > 0;) {
        Request* r = running_[i];
        const int32_t n = int32_t(std::min<int64_t>(r->num_tokens() - r->n_computed, budget));
        if (n <= 0) { ++i; continue; }
        bool preempted_self = false;
        while (!cache_.allocate(r->id, r->n_computed + n)) {
            Request* victim = running_.back();   // newest first
            preempt(victim, out);
            if (victim == r) { preempted_self = true; break; }
        }
        if (preempted_self) break;   // everything after it was newer and is gone too
        out.scheduled.push_back({r, n, false});
        out.total_tokens += n;
        budget -= n;
        ++i;
    }
    // 2. Waiting requests in order, unless this step had to preempt.
    while (out.preempted.empty() && !waiting_.empty() && budget > 0 &&
           int32_t(running_.size()) < cfg_.max_num_seqs) {
        Request* r = waiting_.front();
        PrefixHit hit;
        if (ckpt_ && cache_.prefix_caching() && r->n_computed == 0)
            hit = cache_.match_prefix([r](int64_t i) { return int32_t(r->token_at(i)); }, r->num_tokens(), *ckpt_);
        const int64_t start = hit.n_tokens(cache_.block_size());
        const int32_t n = int32_t(std::min<int64_t>(r->num_tokens() - start, budget));
        if (!cache_.allocate_with_prefix(r->id, hit, start + n)) break;
        waiting_.pop_front();
        if (r->n_preemptions == 0) {
            r->n_cached_tokens = std::min<int64_t>(start, int64_t(r->prompt.size()));
            if (cache_.prefix_caching()) {
                prefix_queries_ += int64_t(r->prompt.size());
                prefix_hits_ += r->n_cached_tokens;
            }
        }
        r->n_computed = start;
        r->status = RequestStatus::kRunning;
        running_.push_back(r);
        out.scheduled.push_back({r, n, true, hit.hashes.empty() ? 0 : hit.hashes.back()});
        out.total_tokens += n;
        budget -= n;
    }
}

void Scheduler::step_done(const ScheduleOutput& plan) {
    for (const auto& s : plan.scheduled) {
        Request* r = s.req;
        r->n_computed += s.n_tokens;
        if (cache_.prefix_caching()) cache_.commit_full_blocks(r->id, r->n_computed, [r](int64_t i) { return int32_t(r->token_at(i)); });
    }
}

}  // namespace kimi
