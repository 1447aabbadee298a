// The engine's counters: EngineStepStats, what one step did (Engine::last_step(), the
// commands' --step-stats), and EngineSnapshot, a consistent copy of every counter taken at the
// end of each step for other threads (the server's /metrics), which the StatsBoard holds.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

namespace kimi {

class Scheduler;
class CacheManager;
class CheckpointStore;
struct CacheSizing;

struct EngineStepStats {
    int32_t n_seqs = 0, n_tokens = 0, n_prefill_tokens = 0, n_decode_seqs = 0;
    int32_t n_running = 0, n_waiting = 0, n_preempted = 0;   // after scheduling
    int32_t blocks_used = 0, slots_used = 0;
    double step_ms = 0.0;
    int64_t attn_output_copies = 0, heap_allocations = 0;   // forward pass, all threads
    int64_t step_heap_allocations = 0;                      // the whole step (schedule → publish)
};

// Speculative decoding's counters, with vLLM's spec_decode meaning: drafts verified, their
// tokens, the tokens accepted, and the acceptances at each draft position.
struct SpecDecodeStats {
    int64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;
    std::vector<int64_t> accepted_per_pos;   // [k]
};

// A consistent, thread-safe copy of the engine's counters (for /metrics).
struct EngineSnapshot {
    int32_t n_running = 0, n_waiting = 0;
    int32_t blocks_used = 0, blocks_total = 0, slots_used = 0, slots_total = 0;
    int64_t steps = 0, prompt_tokens_computed = 0, generated_tokens = 0, preemptions = 0;
    int64_t fair_preemptions = 0;   // sequences preempted to share the batch between client requests
    int64_t attn_output_copies = 0, forward_heap_allocations = 0, step_heap_allocations = 0;
    // Prefix cache: prompt tokens looked up and served at first admission, cached (ref 0) MLA
    // blocks, KDA checkpoints resident / capacity and their bytes, checkpoints written.
    int64_t prefix_queries = 0, prefix_hits = 0;
    int32_t blocks_cached = 0, checkpoints = 0, checkpoints_total = 0;
    int64_t checkpoint_bytes = 0, checkpoints_saved = 0;
    // Memory the engine holds from start to end: the KV/state cache and the checkpoint capacity.
    int64_t cache_bytes = 0, checkpoint_capacity_bytes = 0;
    SpecDecodeStats spec;   // all zero (and no positions) without --speculative-config
    EngineStepStats last;
};

// The EngineSnapshot other threads read: the engine's thread updates it at the end of every
// step, from the engine's scheduler, cache and checkpoints (held by reference: they outlive
// the board), and snapshot() copies it out, both under one mutex. Allocates nothing.
class StatsBoard {
public:
    StatsBoard(const Scheduler& sched, const CacheManager& cache, const CheckpointStore& ckpt,
               const CacheSizing& sizing)
        : sched_(sched), cache_(cache), ckpt_(ckpt), sizing_(sizing) {}

    // A step that ran nothing (or failed): the gauges as they are now. preemptions: all of
    // them since start-up.
    void update(int64_t preemptions);
    // A step that ran the model: the gauges, and its counts added; n_sampled: tokens it sampled;
    // spec: speculative decoding's counters so far (with --speculative-config).
    void update(int64_t preemptions, const EngineStepStats& step, int64_t n_sampled,
                const SpecDecodeStats* spec = nullptr);
    EngineSnapshot snapshot() const;   // thread-safe

private:
    void read_gauges(int64_t preemptions);   // under mu_

    const Scheduler& sched_;
    const CacheManager& cache_;
    const CheckpointStore& ckpt_;
    const CacheSizing& sizing_;
    mutable std::mutex mu_;
    EngineSnapshot snap_;   // under mu_
};

}   // namespace kimi
