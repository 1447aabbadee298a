// Engine implementation (see engine.h). step() is schedule → run the model → postprocess;
// cache sizing lives in cache_sizing.cpp, checkpoint planning in cache/checkpoint_planner.cpp,
// sampling, stop checks and publishing in output_processor.cpp, queueing and cancels in
// request_inbox.cpp, the snapshot in engine_stats.cpp.
#include "runtime/engine.h"

#include <algorithm>
#include <cstdio>

#include "core/alloc_counter.h"
#include "runtime/rank_protocol.h"

namespace kimi {

namespace {
// The ids a token may be drawn from: the tokenizer's, where the model's vocabulary is padded past them.
int64_t sampled_ids(const KimiModel& model, const tok::Tokenizer* tokenizer) {
    const int64_t vocab = model.config().vocab_size;
    return tokenizer ? std::min<int64_t>(vocab, tokenizer->n_vocab()) : vocab;
}
}   // namespace

Engine::Engine(const KimiModel& model, const EngineConfig& cfg, const tok::Tokenizer* tokenizer)
    : model_(model),
      tok_(tokenizer),
      cfg_(cfg),
      sizing_(size_cache(model, cfg)),
      pool_(cfg.threads),
      storage_(model.cache_geometry(sizing_.n_slots + sizing_.n_checkpoints + Speculator::n_slots(cfg),
                                    sizing_.n_blocks, sizing_.block_size, cfg.kv_cache_bf16)),
      cache_(sizing_.n_blocks, sizing_.block_size, sizing_.n_slots,
             (sizing_.max_model_len + sizing_.block_size - 1) / sizing_.block_size),
      ckpt_(sizing_.n_slots, sizing_.n_checkpoints, sizing_.slot_bytes),
      ckpt_plan_(cache_, ckpt_, storage_, sizing_.checkpoint_interval),
      sched_(SchedulerConfig{cfg.max_num_seqs, cfg.max_num_batched_tokens}, cache_, &ckpt_),
      runner_(model, storage_, cache_, &ckpt_),
      outputs_(model.config().vocab_size, sampled_ids(model, tokenizer), model.config().eos_token_id,
               sizing_.max_model_len),
      spec_(cfg, sizing_, sizing_.n_slots + sizing_.n_checkpoints, sampled_ids(model, tokenizer),
            model.config().eos_token_id) {
    verdicts_.reserve(size_t(cfg.max_num_seqs));
    ex_.pool = &pool_;
    ex_.arena = &arena_;
    ex_.layer_arena = &layer_arena_;
    ex_.precision = cfg.precision;
    ex_.attn_output = cfg.attn_output;
    live_.reserve(size_t(cfg.max_num_seqs) * 4);
    // The salt of the block hashes: what else shapes the cached values.
    if (sizing_.prefix_caching)
        cache_.enable_prefix_caching(1 + uint64_t(cfg.precision == Precision::kBF16) + 2 * uint64_t(cfg.kv_cache_bf16));
    profile_run();
    if (model.shard().split()) {
        if (model.shard().rank == 0)
            runner_.lead(dist::Comm::world());
        else
            runner_.join(ex_);
    }
}

void Engine::follow() {
    KIMI_CHECK(model_.shard().split() && model_.shard().rank != 0, "Engine::follow on a rank that leads");
    RankGroup::process().follow_all(dist::Comm::world());
}

void Engine::profile_run() {
    const int32_t bs = sizing_.block_size;
    const int32_t n = std::min({cfg_.max_num_batched_tokens, sizing_.max_model_len, sizing_.n_blocks * bs});
    if (n < 1 || sizing_.n_slots < 1) return;
    const int32_t n_blocks = (n + bs - 1) / bs;
    std::vector<int32_t> ids(size_t(n), 0), starts = {0, n}, past = {0}, slots = {0}, rows = {n - 1};
    std::vector<int32_t> tables(static_cast<size_t>(n_blocks));
    for (int32_t b = 0; b < n_blocks; ++b) tables[size_t(b)] = b;
    storage_.reset_slot(0);
    arena_.reset();
    model_.forward(ex_, ForwardBatch{ids, starts, past, slots, tables, n_blocks, rows}, storage_);
    arena_.reset();   // merged into one block of the high-water size, touched
    storage_.reset_slot(0);
}

Engine::~Engine() {
    stop();
    if (!failure().empty()) return;   // a lost rank: nothing to tell the followers
    try {
        runner_.stop_followers();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kimi-cpp: could not stop the follower ranks: %s\n", e.what());
    }
}

uint64_t Engine::new_group() { return inbox_.new_group(); }

std::shared_ptr<RequestStream> Engine::submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                              std::shared_ptr<StreamNotifier> notifier, uint64_t group,
                                              std::span<const MediaSpan> media) {
    std::unique_ptr<LiveRequest> live = make_live(std::move(prompt), media, params, std::move(notifier));
    std::shared_ptr<RequestStream> s = live->stream;
    inbox_.enqueue(std::span<std::unique_ptr<LiveRequest>>(&live, 1), group);
    return s;
}

std::vector<std::shared_ptr<RequestStream>> Engine::submit_all(std::span<const Submission> reqs,
                                                               std::shared_ptr<StreamNotifier> notifier,
                                                               uint64_t group) {
    // Everything is made before anything is queued: a failure frees it all here, at once.
    std::vector<std::unique_ptr<LiveRequest>> lives;
    std::vector<std::shared_ptr<RequestStream>> streams;
    lives.reserve(reqs.size());
    streams.reserve(reqs.size());
    for (const Submission& r : reqs) {
        lives.push_back(
            make_live(std::vector<int32_t>(r.prompt.begin(), r.prompt.end()), r.media, *r.params, notifier));
        streams.push_back(lives.back()->stream);
    }
    inbox_.enqueue(lives, group);
    return streams;
}

std::unique_ptr<LiveRequest> Engine::make_live(std::vector<int32_t> prompt, std::span<const MediaSpan> media,
                                               const SamplingParams& params, std::shared_ptr<StreamNotifier> notifier) {
    if (prompt.empty()) throw Error("the prompt is empty");
    int64_t media_end = 0;
    for (const MediaSpan& m : media) {
        if (!model_.has_vision()) throw Error(model_.vision_unavailable_reason());
        if (m.offset < media_end || m.n < 1 || m.offset + m.n > int64_t(prompt.size()) || !m.embeds ||
            int64_t(m.embeds->size()) != m.n * model_.config().hidden_size)
            throw Error("an image's tokens do not match the prompt");
        media_end = m.offset + m.n;
    }
    for (int32_t id : prompt)
        if (id < 0 || id >= model_.config().vocab_size)
            throw Error("token id " + std::to_string(id) + " is out of range [0, " +
                        std::to_string(model_.config().vocab_size) + ")");
    if (params.max_tokens < 1) throw Error("max_tokens must be at least 1");
    if (int64_t(prompt.size()) + params.max_tokens > sizing_.max_model_len)
        throw Error("prompt (" + std::to_string(prompt.size()) + " tokens) + max_tokens (" +
                    std::to_string(params.max_tokens) + ") exceeds max-model-len " +
                    std::to_string(sizing_.max_model_len));
    if (!params.stop.empty() && !tok_) throw Error("stop strings need a tokenizer");
    for (const auto& s : params.stop)
        if (s.empty()) throw Error("stop strings must not be empty");
    if (params.structured && !tok_) throw Error("structured output needs a tokenizer");
    if (const std::string why = failure(); !why.empty())
        throw EngineFailed("the engine is not running requests any more: " + why);
    auto live = std::make_unique<LiveRequest>();
    if (params.structured) {
        {
            std::lock_guard<std::mutex> lk(vocab_mu_);
            if (!grammar_vocab_) grammar_vocab_ = std::make_unique<GrammarVocab>(*tok_, model_.config().vocab_size);
        }
        live->grammar = std::make_unique<GrammarState>(params.structured, *grammar_vocab_);
    }
    live->stream = std::make_shared<RequestStream>();
    live->stream->notifier_ = std::move(notifier);
    live->req.params = params;
    if (tok_)
        live->text = std::make_unique<TextStream>(*tok_, live->req.params.stop, params.skip_special_tokens,
                                                  params.include_stop_str_in_output, params.keep_special_ids);
    live->req.prompt = std::move(prompt);
    live->req.media.assign(media.begin(), media.end());
    live->req.output.reserve(size_t(params.max_tokens));
    if (cfg_.speculative.enabled()) live->req.draft.reserve(size_t(cfg_.speculative.num_speculative_tokens));
    if (params.logprobs > 0) {
        live->top_pool.resize(size_t(params.max_tokens));
        for (auto& v : live->top_pool)
            v.reserve(size_t(std::min<int64_t>(params.logprobs, model_.config().vocab_size)));
    }
    live->stream->events_.reserve(size_t(params.max_tokens) + 1);
    live->t0_ms = event_clock_ms();
    return live;
}

void Engine::cancel(uint64_t id) { inbox_.cancel(id); }

void Engine::cancel(RequestStream& stream) noexcept { inbox_.cancel(stream); }

bool Engine::step() {
    try {
        return run_step();
    } catch (const std::bad_alloc&) {
        fail_all(oom_error_);   // made at start: this allocates nothing
        return true;
    } catch (const std::exception& e) {
        std::shared_ptr<const std::string> why = oom_error_;
        try {
            inbox_.set_failure(e.what());
            why = std::make_shared<const std::string>(std::string("the engine failed: ") + e.what());
        } catch (const std::bad_alloc&) {   // the requests still end, with the message made at start
        }
        fail_all(why);
        throw;
    }
}

std::string Engine::failure() const {
    if (std::string why = inbox_.failure(); !why.empty()) return why;
    // A split model: a lost rank is known at once, also while no step runs.
    if (model_.shard().split() && dist::Comm::world().peer_lost()) return dist::Comm::world().peer_lost_reason();
    return "";
}

void Engine::fail_all(const std::shared_ptr<const std::string>& why) {
    inbox_.fail_queued(why);   // not taken first (that allocates): the queued end there, the admitted here
    outputs_.fail_all(sched_, live_, why);
    plan_buf_.clear();   // the plan and rows name requests that are gone now
    sample_buf_.clear();
    stats_.update(total_preemptions_);
}

// One step, as nano-vllm's LLMEngine.step: schedule, run the model, postprocess. The plan and
// the sampled rows live in buffers kept from step to step (no allocation in steady state).
bool Engine::run_step() {
    const uint64_t allocs_before = thread_alloc_count() + pool_.worker_alloc_count();
    ScheduleOutput& plan = plan_buf_;
    if (!schedule(plan)) return false;
    const double t0 = event_clock_ms();
    const ModelOutput out = run_model(plan, sample_buf_);
    record_step(plan);
    // may end requests: `plan` is stale after it
    const int64_t n_taken =
        outputs_.postprocess(out.logits, out.rows, live_, sched_, spec_.enabled() ? &verdicts_ : nullptr);
    if (spec_.enabled()) settle_drafts();
    finish_step(t0, allocs_before, n_taken);
    return true;
}

bool Engine::schedule(ScheduleOutput& plan) {
    inbox_.take(live_, sched_);
    if (spec_.enabled()) spec_.propose(live_);
    sched_.schedule(plan);
    outputs_.finish_aborted(sched_, live_);
    total_preemptions_ += int64_t(plan.preempted.size());
    if (!plan.scheduled.empty()) return true;
    stats_.update(total_preemptions_);
    return false;
}

Engine::ModelOutput Engine::run_model(const ScheduleOutput& plan, std::vector<Request*>& sample_buf) {
    for (const auto& s : plan.scheduled)
        if (s.fresh && s.restore != 0) prefix_hit_tokens_ += s.req->n_computed;
    if (spec_.enabled())
        spec_.draft(ex_, plan, cache_, live_);   // a draft model's tokens, before the forward reads them
    runner_.prepare_states(plan);                // restores first: planning captures may reuse checkpoint slots
    plan_captures(plan);
    const std::span<const ops::StateCapture> captures =
        spec_.enabled() ? spec_.captures(plan, ckpt_plan_.captures()) : ckpt_plan_.captures();
    const Tensor logits = runner_.execute(ex_, plan, captures, sample_buf);   // [R, vocab]
    sched_.step_done(plan);
    ckpt_plan_.commit_captures();
    save_checkpoints(plan);
    return ModelOutput{logits, sample_buf};
}

void Engine::plan_captures(const ScheduleOutput& plan) {
    ckpt_plan_.clear();
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
        const ScheduledRequest& s = plan.scheduled[i];
        const Request& r = *s.req;
        const auto token_at = [&r](int64_t t) { return r.cache_key_at(t); };
        // a draft's tokens are not known yet: no checkpoint is planned over them
        const int32_t n_known = s.n_tokens - s.n_draft;
        if (!ckpt_plan_.plan_chunk(int32_t(i), r.id, r.n_computed, n_known, int64_t(r.prompt.size()), token_at)) break;
    }
}

void Engine::save_checkpoints(const ScheduleOutput& plan) {
    for (const auto& s : plan.scheduled) {
        Request& r = *s.req;
        if (s.n_draft > 0) continue;   // its state is past its known tokens until settle_drafts
        r.tail_checkpoint = ckpt_plan_.save_chunk_end(r.id, r.n_computed, int64_t(r.prompt.size()), r.tail_checkpoint);
    }
}

// After verification: each speculating request's state back to its accepted tokens, then its
// tail checkpoint as save_checkpoints would have taken it.
void Engine::settle_drafts() {
    spec_.settle(verdicts_, storage_, cache_, sched_);
    for (const DraftVerdict& v : verdicts_) {
        Request& r = *v.req;
        r.tail_checkpoint = ckpt_plan_.save_chunk_end(r.id, r.n_computed, int64_t(r.prompt.size()), r.tail_checkpoint);
    }
    verdicts_.clear();
}

void Engine::record_step(const ScheduleOutput& plan) {
    last_ = EngineStepStats{};
    last_.n_seqs = int32_t(plan.scheduled.size());
    last_.n_tokens = plan.total_tokens;
    for (const auto& s : plan.scheduled) {
        const bool decode = s.n_tokens - s.n_draft == 1 && !s.req->output.empty() && !s.fresh;
        last_.n_decode_seqs += decode;
        last_.n_prefill_tokens += decode ? 0 : s.n_tokens;
    }
    last_.n_preempted = int32_t(plan.preempted.size());
    last_.attn_output_copies = ex_.counters.attn_output_copies;
    last_.heap_allocations = ex_.counters.heap_allocations;
}

void Engine::finish_step(double t0_ms, uint64_t allocs_before, int64_t n_sampled) {
    last_.n_running = sched_.n_running();
    last_.n_waiting = sched_.n_waiting();
    last_.blocks_used = cache_.blocks().n_total() - cache_.blocks().n_free();
    last_.slots_used = cache_.slots().n_total() - cache_.slots().n_free();
    last_.step_ms = event_clock_ms() - t0_ms;
    last_.step_heap_allocations = int64_t(thread_alloc_count() + pool_.worker_alloc_count() - allocs_before);
    stats_.update(total_preemptions_, last_, n_sampled, spec_.enabled() ? &spec_.stats() : nullptr);
}

EngineSnapshot Engine::snapshot() const { return stats_.snapshot(); }

void Engine::run_until_idle() {
    while (step()) {}
}

void Engine::start() {
    inbox_.start();
    loop_ = std::thread([this] {
        while (inbox_.wait_for_work([this] { return sched_.has_work(); })) {
            try {
                step();
            } catch (const std::exception& e) {   // failed for good (failure()): requests are refused from now on
                std::fprintf(stderr, "kimi-cpp: engine stopped: %s\n", e.what());
                return;
            }
        }
    });
}

void Engine::stop() {
    inbox_.stop();
    if (loop_.joinable()) loop_.join();
}

}   // namespace kimi
