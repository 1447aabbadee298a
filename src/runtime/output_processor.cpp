// OutputProcessor implementation (see output_processor.h).
#include "runtime/output_processor.h"

#include <algorithm>
#include <new>

#include "core/error.h"

namespace kimi {

OutputProcessor::OutputProcessor(int64_t vocab_size, int64_t n_sampled, int32_t eos_token_id, int32_t max_model_len)
    : sampler_(n_sampled),
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
        bool rejected = false;
        const bool ok = j < n_draft && r.draft_q
            ? verify(l, row, r.draft[size_t(j)], {r.draft_q + int64_t(j) * n_sampled_, size_t(n_sampled_)}, tok,
                     rejected)
            : sample(l, row, tok);
        if (!ok) {   // nothing can follow (no token can go on with the grammar)
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
        if (j == n_draft || rejected || tok.token != r.draft[size_t(j)]) return j;
    }
}

// Structured output: the unmasked draw when it is allowed and that is exact, else the masked one.
bool OutputProcessor::sample(LiveRequest& l, std::span<const float> row, SampledToken& tok) {
    Request& r = l.req;
    if (!l.grammar) {
        sampler_.sample(row, r.params, r.prompt, r.output, r.seed, r.output.size(), tok);
        return true;
    }
    end_ids_.assign(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end());
    end_ids_.push_back(eos_);
    if (Sampler::mask_can_wait(r.params)) {
        sampler_.sample(row, r.params, r.prompt, r.output, r.seed, r.output.size(), tok);
        if (l.grammar->try_accept(tok.token, end_ids_)) return true;
    }
    if (!l.grammar->mask(end_ids_, mask_)) return false;
    sampler_.sample(row, r.params, r.prompt, r.output, r.seed, r.output.size(), tok, mask_, 1);
    l.grammar->accept(tok.token);
    return true;
}

// Speculative sampling (Leviathan et al.; docs/runtime.md#draft-model): draft token d, drawn
// from q, is kept with probability min(1, p(d) / q(d)); else the token is drawn from
// max(0, p − q), normalised. p is the distribution plain sampling draws from (mask, penalties,
// temperature, top-k/p, min-p), so the tokens taken have the target's distribution. Its two
// uniforms are the request's own (seed, output index; attempts 2 and 3).
bool OutputProcessor::verify(LiveRequest& l, std::span<const float> row, int32_t d, std::span<const float> q,
                             SampledToken& tok, bool& rejected) {
    Request& r = l.req;
    std::span<const uint64_t> mask;
    if (l.grammar) {
        end_ids_.assign(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end());
        end_ids_.push_back(eos_);
        if (!l.grammar->mask(end_ids_, mask_)) return false;
        mask = mask_;
    }
    p_.resize(size_t(n_sampled_));   // once: sized at the first verification
    sampler_.distribution(row, r.params, r.prompt, r.output, p_, mask);
    const uint64_t step = r.output.size();
    int32_t token = d;
    rejected = !(Sampler::uniform(r.seed, step, 2) * double(q[size_t(d)]) < double(p_[size_t(d)]));
    if (rejected) {
        for (size_t i = 0; i < p_.size(); ++i) p_[i] = std::max(0.0f, p_[i] - q[i]);
        const int32_t t = Sampler::draw(p_, r.seed, step, 3);
        token = t < 0 ? d : t;   // p = q up to rounding: d it is
    }
    sampler_.report(row, token, r.params, tok, mask);
    if (l.grammar) l.grammar->accept(token);
    return true;
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
