// ModelRunner: turns a ScheduleOutput into a ForwardBatch (token ids, spans, cached
// lengths, state slots, block tables, logit rows), runs the model and hands back the
// logits of every request whose known tokens are all computed after this step (those
// sample a token). Fresh requests get their state slot zeroed — or, with a prefix hit, the
// KDA checkpoint restored — by prepare_states() first; state captures (prefix-cache
// checkpoints mid-sequence) ride along in the batch. The buffers are reused from step to
// step (no allocation in steady state).
#pragma once
#include <vector>

#include "cache/cache_manager.h"
#include "cache/cache_storage.h"
#include "cache/checkpoint_store.h"
#include "model/kimi_model.h"
#include "runtime/scheduler.h"

namespace kimi {

class ModelRunner {
public:
    // ckpt: where fresh requests with a prefix hit restore their KDA state from (may be null).
    ModelRunner(const KimiModel& model, CacheStorage& storage, const CacheManager& cache, CheckpointStore* ckpt = nullptr);

    // The state slots of the plan's fresh requests: zeroed, or restored from a checkpoint.
    void prepare_states(const ScheduleOutput& plan);
    // Returns logits [R, vocab] (arena-owned, valid until the next step); `sample_reqs[i]`
    // owns row i. captures: ordered by (index in plan.scheduled, t).
    Tensor execute(Exec& ex, const ScheduleOutput& plan, std::span<const ops::StateCapture> captures,
                   std::vector<Request*>& sample_reqs);

private:
    const KimiModel& model_;
    CacheStorage& storage_;
    const CacheManager& cache_;
    CheckpointStore* ckpt_;
    std::vector<int32_t> ids_, starts_, past_, slots_, tables_, rows_;
};

}  // namespace kimi
