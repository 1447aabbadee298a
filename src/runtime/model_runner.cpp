// ModelRunner implementation (see model_runner.h).
#include "runtime/model_runner.h"

#include <algorithm>

#include "core/error.h"

namespace kimi {

ModelRunner::ModelRunner(const KimiModel& model, CacheStorage& storage, const CacheManager& cache, CheckpointStore* ckpt)
    : model_(model), storage_(storage), cache_(cache), ckpt_(ckpt) {}

void ModelRunner::prepare_states(const ScheduleOutput& plan) {
    for (const ScheduledRequest& s : plan.scheduled) {
        if (!s.fresh) continue;
        const int32_t slot = cache_.state_slot(s.req->id);
        if (s.restore != 0) {   // a prefix hit: the KDA state at its end
            const bool restored = ckpt_ && ckpt_->restore(s.restore, storage_, slot);
            KIMI_CHECK(restored, "prefix hit without its checkpoint");
        } else {
            storage_.reset_slot(slot);
        }
    }
}

Tensor ModelRunner::execute(Exec& ex, const ScheduleOutput& plan, std::span<const ops::StateCapture> captures,
                            std::vector<Request*>& sample_reqs) {
    const int32_t max_blocks = cache_.max_blocks_per_seq();
    ids_.clear(); starts_.assign(1, 0); past_.clear(); slots_.clear(); tables_.clear(); rows_.clear();
    sample_reqs.clear();
    for (const ScheduledRequest& s : plan.scheduled) {
        Request& r = *s.req;
        for (int64_t i = r.n_computed; i < r.n_computed + s.n_tokens; ++i) ids_.push_back(int32_t(r.token_at(i)));
        starts_.push_back(int32_t(ids_.size()));
        past_.push_back(int32_t(r.n_computed));
        slots_.push_back(cache_.state_slot(r.id));
        const auto table = cache_.block_table(r.id);
        tables_.insert(tables_.end(), table.begin(), table.end());
        tables_.resize(tables_.size() + size_t(max_blocks) - table.size(), 0);
        if (r.n_computed + s.n_tokens == r.num_tokens()) {
            rows_.push_back(int32_t(ids_.size()) - 1);
            sample_reqs.push_back(&r);
        }
    }
    const ForwardBatch batch{ids_, starts_, past_, slots_, tables_, max_blocks, rows_, captures};
    ex.arena->reset();
    return model_.forward(ex, batch, storage_);
}

}  // namespace kimi
