// OutputProcessor: what happens to the requests after the model ran — nano-vllm's
// Scheduler.postprocess and vLLM's check_stop, in one owner. postprocess() takes each
// sampling request's logits row and samples it (for structured output: under its grammar's
// mask, or unmasked when that draw is exact and allowed), appends the token, advances the
// grammar, checks the stop conditions (check_stop: stop strings through the detokenizer, EOS,
// stop_token_ids, max_tokens, max-model-len), publishes the event and finishes the requests
// that stopped (out of the scheduler and the live table). The final events of aborted and
// failed requests are published here too. No heap allocation per token in steady state: the
// sampler's scratch and the mask are kept, top-logprob vectors are reserved at submission.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/live_request.h"
#include "runtime/scheduler.h"
#include "runtime/token_draw.h"

namespace kimi {

// A speculating request still running after its rows were sampled: `accepted` of its n_draft
// draft tokens were taken (docs/runtime.md#speculative); the engine rolls its state back to them.
struct DraftVerdict {
    Request* req = nullptr;
    int32_t n_draft = 0, accepted = 0;
};

class OutputProcessor {
public:
    // vocab_size: the logits' row length; n_sampled (≤ it): the ids a token may be drawn from
    // (the tokenizer's, where the model's vocabulary is padded past them).
    OutputProcessor(int64_t vocab_size, int64_t n_sampled, int32_t eos_token_id, int32_t max_model_len);

    // After a forward: logits [sample_reqs.size(), vocab], row i is sample_reqs[i]'s (each
    // in `live`). Every one of them gets its next token, or ends. A request with a draft owns
    // 1 + draft.size() consecutive rows, its positions in order: each is sampled as plain
    // decoding would sample it, and the request goes on to the next row while the token equals
    // the draft's (verification). verdicts (cleared first): the speculating requests still running.
    // Returns the tokens taken (the rows sampled, less those past a rejected draft token).
    int64_t postprocess(const Tensor& logits, std::span<Request* const> sample_reqs, LiveRequests& live,
                        Scheduler& sched, std::vector<DraftVerdict>* verdicts = nullptr);
    // Whether request `l` stops with `token` (just appended): stop strings (appending the text
    // piece to e.text and setting e.stop_index), EOS, stop ids, then the length limits. The text
    // held back is flushed into e.text when it stops.
    FinishReason check_stop(LiveRequest& l, int32_t token, TokenEvent& e) const;

    // The requests schedule() reaped as aborted: their final event, out of `live`.
    void finish_aborted(Scheduler& sched, LiveRequests& live) const;
    // Every request in `live` ends with `why` as its error (the engine failed it); `live` is
    // emptied. Allocates nothing (memory may just have run out).
    void fail_all(Scheduler& sched, LiveRequests& live, const std::shared_ptr<const std::string>& why) const;
    // The final event of request `l`, failed with `why`; allocates nothing.
    static void fail(LiveRequest& l, const std::shared_ptr<const std::string>& why);
    // The final event of a request that ends without a new token.
    static void publish_finish(LiveRequest& l, FinishReason why);

private:
    // One request's rows (1 + its draft): the tokens taken, each published. Returns how many of
    // the draft were accepted, or -1 when the request ended (it is out of `live` then).
    int32_t take_rows(LiveRequest& l, const float* rows, LiveRequests& live, Scheduler& sched, int64_t& n_taken);

    TokenDraw draw_;   // each row's token, as plain decoding draws it
    int64_t vocab_, n_sampled_;
    int32_t eos_;
    int32_t max_model_len_;
};

}   // namespace kimi
