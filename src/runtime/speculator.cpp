// Speculator (see speculator.h).
#include "runtime/speculator.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/ngram_proposer.h"

namespace kimi {

Speculator::Speculator(const EngineConfig& c, const CacheSizing& z, int32_t first_slot, int64_t n_sampled,
                       int32_t eos_token_id)
    : cfg_(c.speculative),
      first_slot_(first_slot),
      max_seqs_(n_seqs(c)),
      max_model_len_(z.max_model_len),
      full_drafts_(c.speculative_full_drafts) {
    const SpeculativeConfig& cfg = c.speculative;
    if (cfg.method == SpeculativeConfig::Method::kDraftModel) {
        if (!c.draft_model) throw Error("speculative decoding with a draft model: the draft is not loaded");
        DraftModelProposer::Shape s;
        s.n_slots = z.n_slots;
        s.n_blocks = z.n_blocks;
        s.block_size = z.block_size;
        s.max_seqs = max_seqs_;
        s.k = cfg.num_speculative_tokens;
        s.max_tokens = c.max_num_batched_tokens;
        s.n_sampled = n_sampled;
        s.latent_bf16 = c.kv_cache_bf16;
        s.eos_token_id = eos_token_id;
        draft_model_ = std::make_unique<DraftModelProposer>(*c.draft_model, s);
    }
    captures_.reserve(size_t(c.max_num_seqs) * size_t(cfg.num_speculative_tokens + 2));
    base_.reserve(size_t(max_seqs_));
    tokens_.reserve(size_t(std::max(max_model_len_, 1)));   // a request's tokens never outgrow it
    stats_.accepted_per_pos.assign(size_t(cfg.num_speculative_tokens), 0);
}

void Speculator::propose(LiveRequests& live) {
    const NgramParams p{cfg_.prompt_lookup_min, cfg_.prompt_lookup_max, cfg_.num_speculative_tokens};
    int32_t n_drafts = 0;
    for (auto& entry : live) {
        Request& r = entry.second->req;
        r.draft.clear();
        if (n_drafts == max_seqs_ || r.status != RequestStatus::kRunning || r.n_computed != r.num_tokens() - 1)
            continue;
        if (r.draft_skip > 0 && !full_drafts_) {
            --r.draft_skip;
            continue;
        }
        // no draft past max_tokens: the last token of the reply needs none
        const int64_t room = int64_t(r.params.max_tokens) - int64_t(r.output.size()) - 1;
        if (room <= 0) continue;
        if (draft_model_) {   // placeholders, made once scheduled (draft()); the draft reads no images
            if (r.media.empty())
                r.draft.assign(
                    size_t(std::clamp<int64_t>(max_model_len_ - r.num_tokens(), 0, std::min<int64_t>(p.k, room))), 0);
        } else {
            tokens_.assign(r.prompt.begin(), r.prompt.end());
            tokens_.insert(tokens_.end(), r.output.begin(), r.output.end());
            ngram_propose(tokens_, NgramParams{p.min_n, p.max_n, int32_t(std::min<int64_t>(p.k, room))}, max_model_len_,
                          r.draft);
            if (full_drafts_) {   // bench model: k tokens (within capacity k: no allocation)
                const int32_t pad = r.draft.empty() ? tokens_.back() : r.draft.back();
                r.draft.resize(
                    size_t(std::clamp<int64_t>(max_model_len_ - r.num_tokens(), 0, std::min<int64_t>(p.k, room))), pad);
            }
        }
        n_drafts += !r.draft.empty();
    }
}

std::span<const ops::StateCapture> Speculator::captures(const ScheduleOutput& plan,
                                                        std::span<const ops::StateCapture> planned) {
    captures_.clear();
    base_.clear();
    size_t next = 0;
    int32_t slot = first_slot_;
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
        const ScheduledRequest& s = plan.scheduled[i];
        for (; next < planned.size() && planned[next].seq == int32_t(i); ++next) captures_.push_back(planned[next]);
        if (s.n_draft == 0) continue;
        base_.emplace_back(s.req, slot);
        // the state after the known token and t - 1 draft tokens: where a rejection at draft
        // position t - 1 leaves the request
        for (int32_t t = 1; t <= s.n_draft; ++t) captures_.push_back({int32_t(i), t, slot++});
    }
    for (; next < planned.size(); ++next) captures_.push_back(planned[next]);
    // Ordered by (seq, t) as built: a speculating request's planned captures lie within its one
    // known token (t <= 1), before its draft's (t >= 1).
    return captures_;
}

void Speculator::settle(std::span<const DraftVerdict> verdicts, CacheStorage& storage, const CacheManager& cache,
                        Scheduler& sched) {
    if (draft_model_) draft_model_->settle(verdicts);
    for (const DraftVerdict& v : verdicts) {
        Request& r = *v.req;
        if (v.accepted < v.n_draft) {
            const auto b = std::find_if(base_.begin(), base_.end(), [&r](const auto& x) { return x.first == &r; });
            KIMI_CHECK(b != base_.end(), "speculator: a verdict for a request that did not speculate");
            storage.copy_slot(b->second + v.accepted, cache.state_slot(r.id));
        }
        sched.accept_draft(&r, v.accepted);
        ++stats_.drafts;
        stats_.draft_tokens += v.n_draft;
        stats_.accepted_tokens += v.accepted;
        for (int32_t j = 0; j < v.accepted; ++j) ++stats_.accepted_per_pos[size_t(j)];
        if (v.accepted > 0) {
            r.draft_skip = r.draft_backoff = 0;
        } else {
            r.draft_backoff = std::clamp(r.draft_backoff * 2, 1, 16);
            r.draft_skip = r.draft_backoff;
        }
    }
}

}   // namespace kimi
