// OutputProcessor implementation (see output_processor.h).
#include "runtime/output_processor.h"

#include <algorithm>
#include <new>

#include "core/error.h"

namespace kimi {

OutputProcessor::OutputProcessor(int64_t vocab_size, int64_t n_sampled, int32_t eos_token_id, int32_t max_model_len)
    : draw_(n_sampled, eos_token_id),
      vocab_(vocab_size),
      n_sampled_(n_sampled),
      eos_(eos_token_id),
      max_model_len_(max_model_len) {}

int64_t OutputProcessor::postprocess(const Tensor& logits, std::span<Request* const> sample_reqs, LiveRequests& live,
                                     Scheduler& sched, std::vector<DraftVerdict>* verdicts) {
    if (verdicts) verdicts->clear();
    int64_t n_taken = 0;
    for (size_t i = 0; i < sample_reqs.size();) {
        Request& r = *sample_reqs[i];
        const int32_t n_draft = int32_t(r.draft.size());
        KIMI_CHECK(i + size_t(n_draft) < sample_reqs.size() || n_draft == 0, "postprocess: a draft without its rows");
        const int32_t accepted = take_rows(*live.at(r.id), logits.f32() + int64_t(i) * vocab_, live, sched, n_taken);
        if (accepted >= 0 && n_draft > 0 && verdicts) verdicts->push_back({&r, n_draft, accepted});
        i += 1 + size_t(n_draft);
    }
    return n_taken;
}

int32_t OutputProcessor::take_rows(LiveRequest& l, const float* rows, LiveRequests& live, Scheduler& sched,
                                   int64_t& n_taken) {
    Request& r = l.req;
    const uint64_t id = r.id;
    const int32_t n_draft = int32_t(r.draft.size());
    for (int32_t j = 0;; ++j) {
        TokenEvent e;
        e.cached_tokens = r.n_cached_tokens;
        SampledToken tok;
        if (!l.top_pool.empty()) {
            tok.top = std::move(l.top_pool.back());
            l.top_pool.pop_back();
        }
        const std::span<const float> row(rows + int64_t(j) * vocab_, size_t(n_sampled_));
        if (!draw_.draw(row, r, r.output, l.grammar.get(),
                        tok)) {   // nothing can follow (no token can go on with the grammar)
            sched.finish(&r, FinishReason::kStop);
            publish_finish(l, FinishReason::kStop);
            live.erase(id);
            return -1;
        }
        r.output.push_back(tok.token);
        ++n_taken;
        e.token = tok.token;
        e.logprob = tok.logprob;
        e.top = std::move(tok.top);
        const FinishReason why = check_stop(l, tok.token, e);
        e.finish = why;
        e.time_ms = event_clock_ms() - l.t0_ms;
        l.stream->push(std::move(e));
        if (why != FinishReason::kNone) {
            sched.finish(&r, why);
            live.erase(id);
            return -1;
        }
        // the target's own token ends the run
        if (j == n_draft || tok.token != r.draft[size_t(j)]) return j;
    }
}

FinishReason OutputProcessor::check_stop(LiveRequest& l, int32_t token, TokenEvent& e) const {
    const Request& r = l.req;
    if (l.text && l.text->push(token, e.text)) {
        e.stop_index = l.text->stop_index();
        return FinishReason::kStop;
    }
    const bool stop_id = std::find(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end(), token) !=
        r.params.stop_token_ids.end();
    FinishReason why = FinishReason::kNone;
    // a grammar's end: its end-of-sequence finishes the request even with ignore_eos
    if (((!r.params.ignore_eos || l.grammar) && token == eos_) || stop_id)
        why = FinishReason::kStop;
    else if (int32_t(r.output.size()) >= r.params.max_tokens || r.num_tokens() >= max_model_len_)
        why = FinishReason::kLength;
    if (why != FinishReason::kNone && l.text) l.text->finish(e.text);
    return why;
}

void OutputProcessor::finish_aborted(Scheduler& sched, LiveRequests& live) const {
    for (Request* r : sched.finished()) {
        auto it = live.find(r->id);
        publish_finish(*it->second, FinishReason::kAbort);
        live.erase(it);
    }
    sched.finished().clear();
}

void OutputProcessor::fail_all(Scheduler& sched, LiveRequests& live,
                               const std::shared_ptr<const std::string>& why) const {
    for (auto& [id, l] : live) {
        sched.finish(&l->req, FinishReason::kAbort);
        fail(*l, why);
    }
    live.clear();
}

void OutputProcessor::fail(LiveRequest& l, const std::shared_ptr<const std::string>& why) {
    TokenEvent e;
    e.finish = FinishReason::kAbort;
    e.error = why;   // shared, not copied
    e.time_ms = event_clock_ms() - l.t0_ms;
    try {
        l.stream->push(std::move(e));
    } catch (const std::bad_alloc&) {   // its events were reserved at submission; the consumer still sees the end
    }
}

void OutputProcessor::publish_finish(LiveRequest& l, FinishReason why) {
    TokenEvent e;
    e.finish = why;
    if (l.text) l.text->finish(e.text);
    e.time_ms = event_clock_ms() - l.t0_ms;
    e.cached_tokens = l.req.n_cached_tokens;
    l.stream->push(std::move(e));
}

}   // namespace kimi
