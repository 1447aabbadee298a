// Speculator: the engine's side of speculative decoding (docs/runtime.md#speculative). Before a
// step it gives each decoding request a draft (the ngram proposer); the scheduler runs the
// draft after the request's last token (a draft model's tokens are made then, for the
// requests scheduled with one: DraftModelProposer); the forward captures the KDA state after every draft
// position into spare state slots (captures()); postprocess samples each row as plain decoding
// would and stops at the first token that differs from the draft (OutputProcessor's verdicts);
// settle() then brings each request's state back to its accepted tokens (a copy of the capture,
// none when all were accepted) and lets the scheduler take them. A request whose drafts keep
// failing proposes less often (a back-off that doubles, up to 16 steps).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/op_params.h"
#include "cache/cache_storage.h"
#include "runtime/cache_sizing.h"
#include "runtime/draft_model_proposer.h"
#include "runtime/engine_config.h"
#include "runtime/engine_stats.h"
#include "runtime/live_request.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"
#include "runtime/speculative_config.h"

namespace kimi {

class Speculator {
public:
    // first_slot: the first of n_slots(c) spare state slots of the storage; z: the cache's
    // sizes; n_sampled: the ids a token may be drawn from; eos_token_id: the target's. With
    // method draft_model, c.draft_model is the loaded draft.
    Speculator(const EngineConfig& c, const CacheSizing& z, int32_t first_slot, int64_t n_sampled,
               int32_t eos_token_id);
    // The sequences that may speculate in one step, and the spare slots they need (k each).
    static int32_t n_seqs(const EngineConfig& c) {
        return !c.speculative.enabled()  ? 0
            : c.speculative_max_seqs > 0 ? std::min(c.speculative_max_seqs, c.max_num_seqs)
                                         : c.max_num_seqs;
    }
    static int32_t n_slots(const EngineConfig& c) { return n_seqs(c) * c.speculative.num_speculative_tokens; }
    bool enabled() const { return cfg_.enabled(); }

    // Drafts for the running requests whose next step is one token of decoding (at most n_seqs):
    // ngram's, or for a draft model k placeholders that draft() fills once they are scheduled.
    // With speculative_full_drafts, every such request gets a draft of k (ngram's padded) every step.
    void propose(LiveRequests& live);
    // A draft model's tokens for the plan's speculating requests (nothing for ngram).
    void draft(Exec& ex, const ScheduleOutput& plan, const CacheManager& cache, const LiveRequests& live) {
        if (draft_model_) draft_model_->draft(ex, plan, cache, live);
    }
    // `planned` (the prefix cache's, ordered by (seq, t)) and a capture after each draft token's
    // predecessor for every speculating request of the plan, ordered by (seq, t).
    std::span<const ops::StateCapture> captures(const ScheduleOutput& plan, std::span<const ops::StateCapture> planned);
    // After postprocess: each verdict's state back to its accepted tokens, the scheduler told.
    void settle(std::span<const DraftVerdict> verdicts, CacheStorage& storage, const CacheManager& cache,
                Scheduler& sched);
    const SpecDecodeStats& stats() const { return stats_; }

private:
    SpeculativeConfig cfg_;
    int32_t first_slot_, max_seqs_, max_model_len_;
    bool full_drafts_;                                       // EngineConfig::speculative_full_drafts (bench model)
    std::unique_ptr<DraftModelProposer> draft_model_;        // method draft_model
    std::vector<int32_t> tokens_;                            // one request's prompt + output (proposer input)
    std::vector<ops::StateCapture> captures_;                // this step's
    std::vector<std::pair<const Request*, int32_t>> base_;   // speculating request, its first spare slot (this step)
    SpecDecodeStats stats_;
};

}   // namespace kimi
