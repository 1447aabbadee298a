// StatsBoard implementation (see engine_stats.h): the snapshot's gauges read from the
// scheduler, the cache and the checkpoints, a step's counts added, and the copy handed out.
#include "runtime/engine_stats.h"

#include "cache/cache_manager.h"
#include "cache/checkpoint_store.h"
#include "runtime/cache_sizing.h"
#include "runtime/scheduler.h"

namespace kimi {

void StatsBoard::read_gauges(int64_t preemptions) {
    snap_.n_running = sched_.n_running();
    snap_.n_waiting = sched_.n_waiting();
    snap_.blocks_total = cache_.blocks().n_total();
    snap_.blocks_used = snap_.blocks_total - cache_.blocks().n_free();
    snap_.slots_total = cache_.slots().n_total();
    snap_.slots_used = snap_.slots_total - cache_.slots().n_free();
    snap_.preemptions = preemptions;
    snap_.fair_preemptions = sched_.fair_preemptions();
    snap_.prefix_queries = sched_.prefix_queries();
    snap_.prefix_hits = sched_.prefix_hits();
    snap_.blocks_cached = cache_.blocks().n_cached();
    snap_.checkpoints = ckpt_.size();
    snap_.checkpoints_total = sizing_.n_checkpoints;
    snap_.checkpoint_bytes = ckpt_.bytes_used();
    snap_.checkpoints_saved = ckpt_.n_saved();
}

void StatsBoard::update(int64_t preemptions) {
    std::lock_guard<std::mutex> lk(mu_);
    read_gauges(preemptions);
}

void StatsBoard::update(int64_t preemptions, const EngineStepStats& step, int64_t n_sampled,
                        const SpecDecodeStats* spec) {
    std::lock_guard<std::mutex> lk(mu_);
    if (spec) snap_.spec = *spec;   // the same size every step: no allocation after the first
    read_gauges(preemptions);
    ++snap_.steps;
    snap_.prompt_tokens_computed += step.n_prefill_tokens;
    snap_.generated_tokens += n_sampled;
    snap_.attn_output_copies += step.attn_output_copies;
    snap_.forward_heap_allocations += step.heap_allocations;
    snap_.step_heap_allocations += step.step_heap_allocations;
    snap_.last = step;
}

EngineSnapshot StatsBoard::snapshot() const {
    std::lock_guard<std::mutex> lk(mu_);
    EngineSnapshot s = snap_;
    if (s.blocks_total == 0) {   // before the first step
        s.checkpoints_total = sizing_.n_checkpoints;
        s.blocks_total = cache_.blocks().n_total();
        s.slots_total = cache_.slots().n_total();
    }
    s.cache_bytes = sizing_.total_bytes();
    s.checkpoint_capacity_bytes = int64_t(sizing_.n_checkpoints) * sizing_.slot_bytes;
    return s;
}

}   // namespace kimi
