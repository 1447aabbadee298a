// DraftModelProposer (see draft_model_proposer.h).
#include "runtime/draft_model_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace kimi {

CacheGeometry DraftModelProposer::geometry(const KimiModel& draft, const Shape& s) {
    return draft.cache_geometry(s.n_slots + s.max_seqs * s.k, s.n_blocks, s.block_size, s.latent_bf16);
}

DraftModelProposer::DraftModelProposer(const KimiModel& draft, const Shape& shape)
    : model_(draft), shape_(shape), storage_(geometry(draft, shape)), draw_(shape.n_sampled, shape.eos_token_id) {
    KIMI_CHECK(!draft.shard().split(), "a draft model runs in one process");
    seqs_.reserve(size_t(shape.max_seqs));
    ids_.reserve(size_t(shape.max_tokens) + size_t(shape.max_seqs));
    for (auto* v : {&starts_, &past_, &slots_, &rows_}) v->reserve(size_t(shape.max_seqs) + 1);
    row_seq_.reserve(size_t(shape.max_seqs));
}

void DraftModelProposer::draft(Exec& ex, const ScheduleOutput& plan, const CacheManager& cache,
                               const LiveRequests& live) {
    seqs_.clear();
    int32_t rollback = shape_.n_slots;
    for (const ScheduledRequest& s : plan.scheduled) {
        if (s.n_draft == 0) continue;
        Request& r = *s.req;
        Seq q;
        q.req = &r;
        q.slot = cache.state_slot(r.id);
        q.rollback = rollback;
        q.n_known = r.num_tokens();
        q.n_draft = s.n_draft;
        KIMI_CHECK(int32_t(seqs_.size()) < shape_.max_seqs && r.draft_n_computed < q.n_known,
                   "draft model: more speculating requests than reserved, or one already past its tokens");
        if (r.draft_n_computed == 0) storage_.reset_slot(q.slot);
        if (const GrammarState* g = live.at(r.id)->grammar.get()) q.grammar = std::make_unique<GrammarState>(*g);
        seqs_.push_back(std::move(q));
        rollback += shape_.k;
    }
    if (seqs_.empty()) return;
    catch_up(ex, cache);
    // Draft token j (j >= 1) follows token j − 1, at position n_known + j − 1.
    for (int32_t j = 1; j < shape_.k; ++j) {
        begin_batch();
        for (Seq& q : seqs_) {
            if (j >= q.n_draft) continue;
            const int32_t prev = q.req->draft[size_t(j - 1)];
            add(q, q.n_known + j - 1, std::span<const int32_t>(&prev, 1), true, cache);
        }
        if (row_seq_.empty()) break;
        const Tensor logits = run(ex);
        for (size_t i = 0; i < row_seq_.size(); ++i) {
            Seq& q = *row_seq_[i];
            choose(q, logits.f32() + int64_t(i) * model_.config().vocab_size, j);
            // the state after draft token j − 1: where accepting j of them leaves the draft
            if (j < q.n_draft - 1) storage_.copy_slot(q.slot, q.rollback + j);
        }
    }
}

// Every speculating request's known tokens past draft_n_computed, in forwards of at most
// max_tokens; each request's first draft token from its last known token's row.
void DraftModelProposer::catch_up(Exec& ex, const CacheManager& cache) {
    for (;;) {
        begin_batch();
        int64_t budget = shape_.max_tokens;
        for (Seq& q : seqs_) {
            Request& r = *q.req;
            const int64_t left = q.n_known - r.draft_n_computed;
            if (left == 0 || budget == 0) continue;
            const int64_t n = std::min(left, budget);
            chunk_.clear();
            for (int64_t i = r.draft_n_computed; i < r.draft_n_computed + n; ++i)
                chunk_.push_back(int32_t(r.token_at(i)));
            add(q, r.draft_n_computed, chunk_, n == left, cache);
            r.draft_n_computed += n;
            budget -= n;
        }
        if (starts_.size() == 1) return;
        const Tensor logits = run(ex);
        for (size_t i = 0; i < row_seq_.size(); ++i) {
            Seq& q = *row_seq_[i];
            choose(q, logits.f32() + int64_t(i) * model_.config().vocab_size, 0);
            if (q.n_draft > 1) storage_.copy_slot(q.slot, q.rollback);   // accepting none leaves it here
        }
    }
}

void DraftModelProposer::begin_batch() {
    ids_.clear(), starts_.assign(1, 0), past_.clear(), slots_.clear(), tables_.clear(), rows_.clear();
    row_seq_.clear();
}

void DraftModelProposer::add(Seq& q, int64_t from, std::span<const int32_t> ids, bool wants_row,
                             const CacheManager& cache) {
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    starts_.push_back(int32_t(ids_.size()));
    past_.push_back(int32_t(from));
    slots_.push_back(q.slot);
    const auto table = cache.block_table(q.req->id);
    tables_.insert(tables_.end(), table.begin(), table.end());
    tables_.resize(tables_.size() + size_t(cache.max_blocks_per_seq()) - table.size(), 0);
    if (!wants_row) return;
    rows_.push_back(int32_t(ids_.size()) - 1);
    row_seq_.push_back(&q);
}

Tensor DraftModelProposer::run(Exec& ex) {
    const int32_t max_blocks = int32_t(tables_.size() / past_.size());
    const ForwardBatch batch{ids_, starts_, past_, slots_, tables_, max_blocks, rows_};
    ex.arena->reset();
    return model_.forward(ex, batch, storage_);
}

void DraftModelProposer::choose(Seq& q, const float* row, int32_t j) {
    Request& r = *q.req;
    // the target's draw at output index output.size() + j sees the output and the draft before j
    seen_.assign(r.output.begin(), r.output.end());
    seen_.insert(seen_.end(), r.draft.begin(), r.draft.begin() + j);
    if (!draw_.draw(std::span<const float>(row, size_t(shape_.n_sampled)), r, seen_, q.grammar.get(), drawn_)) {
        // the grammar lets nothing follow: a token the verification rejects
        r.draft[size_t(j)] = shape_.eos_token_id < 0 ? 0 : shape_.eos_token_id;
        return;
    }
    r.draft[size_t(j)] = drawn_.token;
}

void DraftModelProposer::settle(std::span<const DraftVerdict> verdicts) {
    for (const DraftVerdict& v : verdicts) {
        const auto q = std::find_if(seqs_.begin(), seqs_.end(), [&v](const Seq& s) { return s.req == v.req; });
        KIMI_CHECK(q != seqs_.end(), "draft model: a verdict for a request that did not draft");
        Request& r = *v.req;
        // the draft has read the known tokens and its own first n_draft − 1 tokens
        const int32_t keep = std::min(v.accepted, q->n_draft - 1);
        if (keep < q->n_draft - 1) storage_.copy_slot(q->rollback + keep, q->slot);
        r.draft_n_computed = q->n_known + keep;
    }
    seqs_.clear();   // the requests that ended in postprocess are gone: nothing more is read of them
}

}   // namespace kimi
