// Scheduler implementation (see scheduler.h). The whole policy is schedule() and its two passes.
#include "runtime/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace kimi {

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
    r->draft.clear();
    r->n_computed = r->draft_n_computed = 0;   // a draft model's cache goes with the blocks and slot
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
    schedule_running(out, budget);
    admit_waiting(out, budget);
}

// 1. Running requests, oldest first.
void Scheduler::schedule_running(ScheduleOutput& out, int32_t& budget) {
    for (size_t i = 0; i < running_.size() && budget > 0;) {
        Request* r = running_[i];
        const int32_t n_draft = draft_that_fits(r, budget);
        const int32_t n =
            n_draft > 0 ? 1 + n_draft : int32_t(std::min<int64_t>(r->num_tokens() - r->n_computed, budget));
        if (n <= 0) {
            ++i;
            continue;
        }
        bool preempted_self = false;
        while (!cache_.allocate(r->id, r->n_computed + n)) {
            Request* victim = running_.back();   // newest first
            preempt(victim, out);
            if (victim == r) {
                preempted_self = true;
                break;
            }
        }
        if (preempted_self) break;   // everything after it was newer and is gone too
        out.scheduled.push_back({r, n, false, 0, n_draft});
        out.total_tokens += n;
        budget -= n;
        ++i;
    }
}

// A decoding request's draft runs with its last token as far as the budget goes, and only where
// its blocks can be had without preempting anyone (else it is dropped: speculation never costs
// another request its place). Returns the draft's length, r->draft cut to it.
int32_t Scheduler::draft_that_fits(Request* r, int32_t budget) {
    if (r->draft.empty()) return 0;
    int32_t n = 0;
    if (r->num_tokens() - r->n_computed == 1) {
        n = int32_t(std::min<int64_t>(int64_t(r->draft.size()), budget - 1));
        if (n > 0 && !cache_.allocate(r->id, r->n_computed + 1 + n)) n = 0;
    }
    r->draft.resize(size_t(n));   // budget >= 1 here, so n >= 0
    return n;
}

// 2. Waiting requests, unless this step had to preempt: the one whose group runs the
// fewest sequences, in queue order among equals (plain FCFS when every request is its own
// group). A full batch makes room for it when another group runs two or more sequences
// beyond it: that group's newest sequence is preempted (fair_share_victim).
void Scheduler::admit_waiting(ScheduleOutput& out, int32_t& budget) {
    while (out.preempted.empty() && !waiting_.empty() && budget > 0) {
        const size_t pick = fairest_waiting();
        Request* r = waiting_[pick];
        if (int32_t(running_.size()) >= cfg_.max_num_seqs) {
            Request* victim = fair_share_victim(r->group);
            if (!victim) break;
            const auto at = std::find_if(out.scheduled.begin(), out.scheduled.end(),
                                         [victim](const ScheduledRequest& x) { return x.req == victim; });
            if (at != out.scheduled.end()) {   // scheduled above: give back its tokens
                budget += at->n_tokens;
                out.total_tokens -= at->n_tokens;
                out.scheduled.erase(at);
            }
            preempt(victim, out);
            out.preempted.pop_back();   // a fairness preemption does not stop admission
            ++fair_preemptions_;
            continue;   // the victim went to the queue's front: choose again
        }
        PrefixHit hit;
        if (ckpt_ && cache_.prefix_caching() && r->n_computed == 0)
            hit = cache_.match_prefix([r](int64_t i) { return r->cache_key_at(i); }, r->num_tokens(), *ckpt_);
        const int64_t start = hit.n_tokens(cache_.block_size());
        const int32_t n = int32_t(std::min<int64_t>(r->num_tokens() - start, budget));
        if (!cache_.allocate_with_prefix(r->id, hit, start + n)) break;
        waiting_.erase(waiting_.begin() + std::ptrdiff_t(pick));
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

int32_t Scheduler::running_in_group(uint64_t group) const {
    int32_t n = 0;
    for (const Request* q : running_) n += q->group == group;
    return n;
}

size_t Scheduler::fairest_waiting() const {
    size_t best = 0;
    int32_t best_n = INT32_MAX;
    for (size_t i = 0; i < waiting_.size() && best_n > 0; ++i) {
        const int32_t n = running_in_group(waiting_[i]->group);
        if (n < best_n) {
            best = i;
            best_n = n;
        }
    }
    return best;
}

Request* Scheduler::fair_share_victim(uint64_t group) const {
    const int32_t mine = running_in_group(group);
    Request* victim = nullptr;
    int32_t most = mine + 1;   // a victim's group must run at least two more than this one
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {   // newest first
        const int32_t n = running_in_group((*it)->group);
        if (n > most) {
            victim = *it;
            most = n;
        }
    }
    return victim;
}

void Scheduler::step_done(const ScheduleOutput& plan) {
    for (const auto& s : plan.scheduled) {
        Request* r = s.req;
        r->n_computed += s.n_tokens - s.n_draft;
        if (cache_.prefix_caching())
            cache_.commit_full_blocks(r->id, r->n_computed, [r](int64_t i) { return r->cache_key_at(i); });
    }
}

void Scheduler::accept_draft(Request* r, int32_t accepted) {
    KIMI_CHECK(accepted >= 0 && accepted <= int32_t(r->draft.size()) && r->n_computed + accepted <= r->num_tokens(),
               "accept_draft: more tokens than the draft or the output has");
    r->draft.clear();
    r->n_computed += accepted;
    if (cache_.prefix_caching())   // only accepted tokens are ever named in the prefix cache
        cache_.commit_full_blocks(r->id, r->n_computed, [r](int64_t i) { return r->cache_key_at(i); });
    cache_.shrink(r->id, r->n_computed);
}

}   // namespace kimi
