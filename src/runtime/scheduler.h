// Scheduler: token-budget continuous batching with chunked prefill and preemption by
// recompute (vLLM v1 semantics, nano-vllm size). Each step: running requests first, oldest
// first (decodes and unfinished prefill chunks), then waiting ones in arrival order while
// the token budget and max_num_seqs allow; a long prompt is chunked by the budget. When the
// cache runs out, the newest running request is preempted (its blocks and slot freed, its
// n_computed reset; it resumes from the waiting queue's front, recomputing what it had).
// Fairness between client requests (Request::group: the n × prompts of one HTTP request):
// the waiting sequence whose group runs the fewest goes first, and a full batch preempts the
// newest sequence of a group running two or more beyond it, so a request of 64 sequences
// cannot keep a 2-token request waiting for its whole length (docs/runtime.md#fairness).
// Integers only — no tensors.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "cache/cache_manager.h"
#include "runtime/request.h"

namespace kimi {

struct SchedulerConfig {   // the engine passes EngineConfig's (--max-num-seqs, --max-num-batched-tokens)
    int32_t max_num_seqs = 8;
    int32_t max_num_batched_tokens = 256;
};

struct ScheduledRequest {
    Request* req = nullptr;
    int32_t n_tokens = 0;   // tokens [n_computed, n_computed + n_tokens) run this step
    bool fresh = false;     // first step since (re)admission: its state slot must be reset
    uint64_t restore = 0;   // fresh with a prefix hit: restore this KDA checkpoint instead
    int32_t n_draft = 0;    // the last n_draft of the n_tokens are the request's draft (to verify)
};

struct ScheduleOutput {
    std::vector<ScheduledRequest> scheduled;
    std::vector<Request*> preempted;
    int32_t total_tokens = 0;
    void clear() {
        scheduled.clear();
        preempted.clear();
        total_tokens = 0;
    }
};

class Scheduler {
public:
    // ckpt: the KDA checkpoints a prefix hit needs (with the cache manager's prefix caching;
    // may be null).
    Scheduler(const SchedulerConfig& cfg, CacheManager& cache, const CheckpointStore* ckpt = nullptr);

    void add(Request* r);   // → waiting (back)
    // Plans one step into `out` (cleared first). Aborted requests are finished first.
    void schedule(ScheduleOutput& out);
    // After the step ran: advances n_computed of every scheduled request over its known tokens
    // (a draft's tokens wait for accept_draft).
    void step_done(const ScheduleOutput& plan);
    // Speculative decoding, after verification: the first `accepted` tokens of r's draft (now
    // appended to its output) are computed; the draft goes, and so do the blocks past them.
    void accept_draft(Request* r, int32_t accepted);
    // Ends a running or waiting request: frees its cache, removes it from the queues.
    void finish(Request* r, FinishReason why);

    bool has_work() const { return !running_.empty() || !waiting_.empty(); }
    int32_t n_running() const { return int32_t(running_.size()); }
    int32_t n_waiting() const { return int32_t(waiting_.size()); }
    // Prefix-cache lookups at first admission, in prompt tokens: looked up, and served (vLLM's
    // prefix_cache_queries / prefix_cache_hits).
    int64_t prefix_queries() const { return prefix_queries_; }
    int64_t prefix_hits() const { return prefix_hits_; }
    int64_t fair_preemptions() const { return fair_preemptions_; }   // preemptions made for fairness
    // Finished requests since the last call (aborts found by schedule(), preempted ones excluded).
    std::vector<Request*>& finished() { return finished_; }

private:
    // The two passes of schedule(), each taking its tokens from `budget`.
    void schedule_running(ScheduleOutput& out, int32_t& budget);
    void admit_waiting(ScheduleOutput& out, int32_t& budget);
    void preempt(Request* r, ScheduleOutput& out);
    int32_t draft_that_fits(Request* r, int32_t budget);
    int32_t running_in_group(uint64_t group) const;
    size_t fairest_waiting() const;                     // index into waiting_
    Request* fair_share_victim(uint64_t group) const;   // null: the batch is fair to `group`

    SchedulerConfig cfg_;
    CacheManager& cache_;
    const CheckpointStore* ckpt_;
    std::vector<Request*> running_;   // admission order (oldest first)
    std::deque<Request*> waiting_;
    std::vector<Request*> finished_;
    int64_t prefix_queries_ = 0, prefix_hits_ = 0, fair_preemptions_ = 0;
};

}   // namespace kimi
