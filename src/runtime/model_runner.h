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
#include "dist/comm.h"
#include "model/kimi_model.h"
#include "runtime/rank_protocol.h"
#include "runtime/scheduler.h"

namespace kimi {

class ModelRunner {
public:
    // ckpt: where fresh requests with a prefix hit restore their KDA state from (may be null).
    ModelRunner(const KimiModel& model, CacheStorage& storage, const CacheManager& cache,
                CheckpointStore* ckpt = nullptr);

    // The state slots of the plan's fresh requests: zeroed, or restored from a checkpoint.
    void prepare_states(const ScheduleOutput& plan);
    // Returns logits [R, vocab] (arena-owned, valid until the next step); `sample_reqs[i]`
    // owns row i (a request with a draft: 1 + n_draft rows, its positions in order). captures:
    // ordered by (index in plan.scheduled, t).
    Tensor execute(Exec& ex, const ScheduleOutput& plan, std::span<const ops::StateCapture> captures,
                   std::vector<Request*>& sample_reqs);

    // A model split over MPI ranks (rank_protocol.h): rank 0 leads — before each forward it
    // broadcasts the slot changes made since the last one (logged by the storage) and the
    // batch — and every other rank joins RankGroup::process(), whose follow_all() applies them
    // and runs the same forward on its part of the model, until the leader stops them.
    void lead(dist::Comm& comm);
    void join(Exec& ex);
    void stop_followers();

private:
    friend class RankGroup;   // runs the step messages on a following rank
    const KimiModel& model_;
    CacheStorage& storage_;
    const CacheManager& cache_;
    CheckpointStore* ckpt_;
    void send(RankMessage kind, int32_t max_blocks, std::span<const ops::StateCapture> captures);
    void run_message(const int32_t* p, Exec& ex);   // a step message's payload (after its header)

    std::vector<int32_t> ids_, starts_, past_, slots_, tables_, rows_;
    std::vector<int32_t> embed_rows_;   // image tokens of this step (ForwardBatch::embed_rows)
    std::vector<float> embed_values_;
    dist::Comm* lead_ = nullptr;
    int32_t index_ = -1;             // in RankGroup::process() (split models)
    std::vector<SlotOp> slot_ops_;   // since the last forward (the leader's log)
    std::vector<int32_t> msg_;       // one step, flattened
    std::vector<ops::StateCapture> captures_in_;
};

}   // namespace kimi
