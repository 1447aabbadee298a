// ModelRunner implementation (see model_runner.h).
#include "runtime/model_runner.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/error.h"

namespace kimi {

ModelRunner::ModelRunner(const KimiModel& model, CacheStorage& storage, const CacheManager& cache,
                         CheckpointStore* ckpt)
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
    ids_.clear();
    starts_.assign(1, 0);
    past_.clear();
    slots_.clear();
    tables_.clear();
    rows_.clear();
    embed_rows_.clear();
    embed_values_.clear();
    sample_reqs.clear();
    const int64_t d = model_.config().hidden_size;
    for (const ScheduledRequest& s : plan.scheduled) {
        Request& r = *s.req;
        const int64_t base = int64_t(ids_.size()) - r.n_computed;   // batch row of the request's token i: base + i
        for (int64_t i = r.n_computed; i < r.n_computed + s.n_tokens; ++i) ids_.push_back(int32_t(r.token_at(i)));
        for (const MediaSpan& m : r.media) {   // this chunk's image tokens take the projector's rows
            const int64_t i0 = std::max(r.n_computed, m.offset),
                          i1 = std::min(r.n_computed + s.n_tokens, m.offset + m.n);
            for (int64_t i = i0; i < i1; ++i) {
                embed_rows_.push_back(int32_t(base + i));
                const float* v = m.embeds->data() + (i - m.offset) * d;
                embed_values_.insert(embed_values_.end(), v, v + d);
            }
        }
        starts_.push_back(int32_t(ids_.size()));
        past_.push_back(int32_t(r.n_computed));
        slots_.push_back(cache_.state_slot(r.id));
        const auto table = cache_.block_table(r.id);
        tables_.insert(tables_.end(), table.begin(), table.end());
        tables_.resize(tables_.size() + size_t(max_blocks) - table.size(), 0);
        // the last known token samples; with a draft, so does every draft token (verification)
        if (r.n_computed + s.n_tokens - s.n_draft == r.num_tokens())
            for (int32_t j = s.n_draft; j >= 0; --j) {
                rows_.push_back(int32_t(ids_.size()) - 1 - j);
                sample_reqs.push_back(&r);
            }
    }
    if (lead_) send(RankMessage::kStep, max_blocks, captures);
    const ForwardBatch batch{ids_,       starts_, past_,    slots_,      tables_,
                             max_blocks, rows_,   captures, embed_rows_, embed_values_};
    ex.arena->reset();
    return model_.forward(ex, batch, storage_);
}

namespace {
template <class T>
void put(std::vector<int32_t>& m, const std::vector<T>& v) {
    static_assert(sizeof(T) % sizeof(int32_t) == 0);
    m.push_back(int32_t(v.size()));
    const auto* p = reinterpret_cast<const int32_t*>(v.data());
    m.insert(m.end(), p, p + v.size() * (sizeof(T) / sizeof(int32_t)));
}
template <class T>
const int32_t* get(const int32_t* p, std::vector<T>& v) {
    v.resize(size_t(*p++));
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(static_cast<void*>(v.data()), p, v.size() * sizeof(T));
    return p + v.size() * (sizeof(T) / sizeof(int32_t));
}

}   // namespace

void ModelRunner::lead(dist::Comm& comm) {
    lead_ = &comm;
    index_ = RankGroup::process().lead();
    slot_ops_.reserve(1024);
    storage_.log_slot_ops(&slot_ops_);
}

void ModelRunner::join(Exec& ex) { index_ = RankGroup::process().join(*this, ex); }

// Payload (after the header: kind, the runner's index): max_blocks, then each list as its
// length and its items: slot ops, ids, starts, past, slots, tables, rows, captures, image rows
// and their values.
void ModelRunner::send(RankMessage kind, int32_t max_blocks, std::span<const ops::StateCapture> captures) {
    begin_rank_message(msg_, kind, index_);
    msg_.push_back(max_blocks);
    put(msg_, slot_ops_);
    for (const auto* v : {&ids_, &starts_, &past_, &slots_, &tables_, &rows_}) put(msg_, *v);
    captures_in_.assign(captures.begin(), captures.end());
    put(msg_, captures_in_);
    put(msg_, embed_rows_);
    put(msg_, embed_values_);
    slot_ops_.clear();
    send_rank_message(*lead_, msg_);
}

void ModelRunner::run_message(const int32_t* p, Exec& ex) {
    const int32_t max_blocks = *p++;
    p = get(p, slot_ops_);
    for (auto* v : {&ids_, &starts_, &past_, &slots_, &tables_, &rows_}) p = get(p, *v);
    p = get(p, captures_in_);
    p = get(p, embed_rows_);
    get(p, embed_values_);
    for (const SlotOp& op : slot_ops_) storage_.apply(op);
    const ForwardBatch batch{ids_,       starts_, past_,        slots_,      tables_,
                             max_blocks, rows_,   captures_in_, embed_rows_, embed_values_};
    ex.arena->reset();
    model_.forward(ex, batch, storage_);
}

void ModelRunner::stop_followers() {
    if (!lead_) return;
    ids_.clear(), starts_.clear(), past_.clear(), slots_.clear(), tables_.clear(), rows_.clear();
    embed_rows_.clear(), embed_values_.clear();
    send(RankMessage::kStop, 0, {});
    lead_ = nullptr;
    storage_.log_slot_ops(nullptr);
}

}   // namespace kimi
