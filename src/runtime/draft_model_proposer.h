// DraftModelProposer: proposals from a smaller Kimi Linear or K3 checkpoint with the target's
// tokenizer, vLLM's method "draft_model" (docs/runtime.md#draft-model).
//
// The draft's cache lives in the same pools as the target's: a request's state slot s and MLA
// block b hold the target's entries in the engine's storage and the draft's in this one (same
// slot and block ids, other shapes). So the draft's cache is allocated, freed, preempted and
// shared by prefix hits with the target's, and needs no bookkeeping but how far the draft has
// read a request's tokens (Request::draft_n_computed; a fresh or preempted request starts at 0).
//
// Each step, for the plan's speculating requests (their draft lengths already cut by the
// scheduler): one batched forward catches every one up on its known tokens (chunked to the
// token budget), then k − 1 single-token forwards, batched over the requests, extend the
// drafts. Draft token j is drawn from the draft's logits exactly as the target's token at that
// output index will be drawn (TokenDraw: the request's sampling parameters, its seed's uniform
// for that index, the penalties over the output and the draft before j, and for structured
// output the request's grammar advanced through the draft so far, a copy of its state). So
// greedy drafts are the draft's argmax, a seeded draft equals the target's own draw wherever
// the two models agree, and verification is plain sampling: the output is plain decoding's.
// The draft's state after each of its tokens but the last goes to spare slots, so after
// verification it is rolled back to the accepted tokens by one copy.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/cache_manager.h"
#include "cache/cache_storage.h"
#include "model/kimi_model.h"
#include "runtime/live_request.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"
#include "runtime/token_draw.h"

namespace kimi {

class DraftModelProposer {
public:
    // n_slots, n_blocks, block_size: the target's cache pools (CacheSizing); max_seqs: the
    // requests that may speculate in one step; k: num_speculative_tokens; n_sampled: the ids a
    // token may be drawn from; max_tokens: the most tokens of one forward (the token budget).
    struct Shape {
        int32_t n_slots = 0, n_blocks = 0, block_size = 16, max_seqs = 0, k = 1, max_tokens = 256;
        int64_t n_sampled = 0;
        bool latent_bf16 = false;
        int32_t eos_token_id = -1;   // where a grammar may end (with the request's stop ids)
    };
    DraftModelProposer(const KimiModel& draft, const Shape& shape);
    // The draft's storage: one slot per target slot plus k per speculating request, one block
    // per target block.
    static CacheGeometry geometry(const KimiModel& draft, const Shape& shape);

    // Fills the draft tokens (placeholders until now) of the plan's speculating requests (each
    // in `live`, which holds their grammars).
    void draft(Exec& ex, const ScheduleOutput& plan, const CacheManager& cache, const LiveRequests& live);
    // After verification: each verdict's draft state back to its accepted tokens.
    void settle(std::span<const DraftVerdict> verdicts);
    const CacheStorage& storage() const { return storage_; }

private:
    struct Seq {
        Request* req = nullptr;
        int32_t slot = 0, rollback = 0;   // its state slot; its first spare slot
        int64_t n_known = 0;              // its known tokens when it drafted
        int32_t n_draft = 0;
        std::unique_ptr<GrammarState> grammar;   // structured output: advanced through the draft
    };
    // The batch under construction: sequence q reads tokens [from, from + ids.size()).
    void begin_batch();   // an empty batch
    void add(Seq& q, int64_t from, std::span<const int32_t> ids, bool wants_row, const CacheManager& cache);
    Tensor run(Exec& ex);   // the batch's forward: logits [rows, vocab]
    void catch_up(Exec& ex, const CacheManager& cache);
    // Draft token j of q from its logits row.
    void choose(Seq& q, const float* row, int32_t j);

    const KimiModel& model_;
    Shape shape_;
    CacheStorage storage_;
    TokenDraw draw_;
    SampledToken drawn_;          // the draw's token (its logprob vectors kept from draw to draw)
    std::vector<int32_t> seen_;   // a request's output and its draft before the token drawn
    std::vector<Seq> seqs_;
    // the forward's batch (reused from step to step)
    std::vector<int32_t> ids_, starts_, past_, slots_, tables_, rows_;
    std::vector<Seq*> row_seq_;    // the sequence of each logits row
    std::vector<int32_t> chunk_;   // one sequence's catch-up tokens
};

}   // namespace kimi
