// Engine implementation (see engine.h). step() is schedule → run the model → postprocess;
// cache sizing lives in cache_sizing.cpp, checkpoint planning in cache/checkpoint_planner.cpp,
// sampling, stop checks and publishing in output_processor.cpp.
#include "runtime/engine.h"

#include <algorithm>
#include <cstdio>

#include "core/alloc_counter.h"
#include "core/rng.h"
#include "runtime/rank_protocol.h"

namespace kimi {

Engine::Engine(const KimiModel& model, const EngineConfig& cfg, const tok::Tokenizer* tokenizer)
    : model_(model),
      tok_(tokenizer),
      cfg_(cfg),
      sizing_(size_cache(model, cfg)),
      pool_(cfg.threads),
      storage_(model.cache_geometry(sizing_.n_slots + sizing_.n_checkpoints, sizing_.n_blocks, sizing_.block_size,
                                    cfg.kv_cache_bf16)),
      cache_(sizing_.n_blocks, sizing_.block_size, sizing_.n_slots,
             (sizing_.max_model_len + sizing_.block_size - 1) / sizing_.block_size),
      ckpt_(sizing_.n_slots, sizing_.n_checkpoints, sizing_.slot_bytes),
      ckpt_plan_(cache_, ckpt_, storage_, sizing_.checkpoint_interval),
      sched_(SchedulerConfig{cfg.max_num_seqs, cfg.max_num_batched_tokens}, cache_, &ckpt_),
      runner_(model, storage_, cache_, &ckpt_),
      outputs_(
          model.config().vocab_size,
          tokenizer ? std::min<int64_t>(model.config().vocab_size, tokenizer->n_vocab()) : model.config().vocab_size,
          model.config().eos_token_id, sizing_.max_model_len) {
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

uint64_t Engine::new_group() {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    return next_id_++;   // groups and request ids share one counter: a group never equals another request's id
}

std::shared_ptr<RequestStream> Engine::submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                              std::shared_ptr<StreamNotifier> notifier, uint64_t group,
                                              std::span<const MediaSpan> media) {
    std::unique_ptr<LiveRequest> live = make_live(std::move(prompt), media, params, std::move(notifier));
    std::shared_ptr<RequestStream> s = live->stream;
    enqueue(std::span<std::unique_ptr<LiveRequest>>(&live, 1), group);
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
    enqueue(lives, group);
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
    if (params.logprobs > 0) {
        live->top_pool.resize(size_t(params.max_tokens));
        for (auto& v : live->top_pool)
            v.reserve(size_t(std::min<int64_t>(params.logprobs, model_.config().vocab_size)));
    }
    live->stream->events_.reserve(size_t(params.max_tokens) + 1);
    live->t0_ms = event_clock_ms();
    return live;
}

void Engine::enqueue(std::span<std::unique_ptr<LiveRequest>> lives, uint64_t group) {
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        const size_t need = inbox_.size() + lives.size();
        if (inbox_.capacity() < need)
            inbox_.reserve(std::max(need, 2 * inbox_.capacity()));   // may throw: nothing queued
        for (std::unique_ptr<LiveRequest>& live : lives) {           // allocates nothing from here on
            live->req.id = next_id_++;
            live->req.group = group != 0 ? group : live->req.id;
            // A request without a seed gets one derived from its id: reproducible per process.
            live->req.seed =
                live->req.params.seed ? *live->req.params.seed : Rng(live->req.id * 0x9e3779b97f4a7c15ull).next();
            live->stream->id_ = live->req.id;
            inbox_.push_back(std::move(live));
        }
    }
    inbox_cv_.notify_one();
}

void Engine::cancel(uint64_t id) {
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        cancels_.push_back(id);
    }
    inbox_cv_.notify_one();
}

void Engine::cancel(RequestStream& stream) noexcept {
    if (stream.cancel_requested_.exchange(true)) return;
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        cancel_flagged_ = true;
    }
    inbox_cv_.notify_one();
}

void Engine::admit_pending() {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    // Room first: then an emplace that runs out of memory fails before it takes the request
    // (a rehash could drop it). What was moved before a failure is null here; fail_all skips it.
    const size_t need = live_.size() + inbox_.size();
    if (!inbox_.empty() && double(need) > double(live_.bucket_count()) * double(live_.max_load_factor()))
        live_.reserve(need);
    for (auto& l : inbox_) {
        if (!l) continue;
        Request* r = &l->req;
        const uint64_t id = r->id;
        live_.emplace(id, std::move(l));
        sched_.add(r);
    }
    inbox_.clear();
    for (uint64_t id : cancels_) {
        auto it = live_.find(id);
        if (it != live_.end()) it->second->req.abort_requested = true;
    }
    cancels_.clear();
    if (cancel_flagged_) {   // only after a cancel(RequestStream&): no scan on an ordinary step
        cancel_flagged_ = false;
        for (auto& [id, l] : live_)
            if (l->stream->cancel_requested_.load(std::memory_order_relaxed)) l->req.abort_requested = true;
    }
}

bool Engine::step() {
    try {
        return run_step();
    } catch (const std::bad_alloc&) {
        fail_all(oom_error_);   // made at start: this allocates nothing
        return true;
    } catch (const std::exception& e) {
        std::shared_ptr<const std::string> why = oom_error_;
        try {
            {
                std::lock_guard<std::mutex> lk(inbox_mu_);
                failure_ = e.what();
            }
            why = std::make_shared<const std::string>(std::string("the engine failed: ") + e.what());
        } catch (const std::bad_alloc&) {   // the requests still end, with the message made at start
        }
        fail_all(why);
        throw;
    }
}

std::string Engine::failure() const {
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        if (!failure_.empty()) return failure_;
    }
    // A split model: a lost rank is known at once, also while no step runs.
    if (model_.shard().split() && dist::Comm::world().peer_lost()) return dist::Comm::world().peer_lost_reason();
    return "";
}

void Engine::fail_all(const std::shared_ptr<const std::string>& why) {
    {
        // Not admitted first (that allocates): the queued requests end here, the admitted ones below.
        std::lock_guard<std::mutex> lk(inbox_mu_);
        for (auto& l : inbox_)
            if (l) OutputProcessor::fail(*l, why);   // null: admitted before memory ran out (in live_)
        inbox_.clear();
        cancels_.clear();
        cancel_flagged_ = false;
    }
    outputs_.fail_all(sched_, live_, why);
    plan_.clear();
    sample_reqs_.clear();
    update_snapshot(false);
}

// One step, as nano-vllm's LLMEngine.step: schedule, run the model, postprocess.
bool Engine::run_step() {
    const uint64_t allocs_before = thread_alloc_count() + pool_.worker_alloc_count();
    if (!schedule()) return false;
    const double t0 = event_clock_ms();
    const Tensor logits = run_model();   // [sample_reqs_.size(), vocab]
    record_step();
    outputs_.postprocess(logits, sample_reqs_, live_, sched_);   // may end requests: plan_ is stale after it
    finish_step(t0, allocs_before);
    return true;
}

bool Engine::schedule() {
    admit_pending();
    sched_.schedule(plan_);
    outputs_.finish_aborted(sched_, live_);
    total_preemptions_ += int64_t(plan_.preempted.size());
    if (!plan_.scheduled.empty()) return true;
    update_snapshot(false);
    return false;
}

Tensor Engine::run_model() {
    for (const auto& s : plan_.scheduled)
        if (s.fresh && s.restore != 0) prefix_hit_tokens_ += s.req->n_computed;
    runner_.prepare_states(plan_);   // restores first: planning captures may reuse checkpoint slots
    plan_captures();
    const Tensor logits = runner_.execute(ex_, plan_, ckpt_plan_.captures(), sample_reqs_);
    sched_.step_done(plan_);
    ckpt_plan_.commit_captures();
    save_checkpoints();
    return logits;
}

void Engine::plan_captures() {
    ckpt_plan_.clear();
    for (size_t i = 0; i < plan_.scheduled.size(); ++i) {
        const ScheduledRequest& s = plan_.scheduled[i];
        const Request& r = *s.req;
        const auto token_at = [&r](int64_t t) { return r.cache_key_at(t); };
        if (!ckpt_plan_.plan_chunk(int32_t(i), r.id, r.n_computed, s.n_tokens, int64_t(r.prompt.size()), token_at))
            break;
    }
}

void Engine::save_checkpoints() {
    for (const auto& s : plan_.scheduled) {
        Request& r = *s.req;
        r.tail_checkpoint = ckpt_plan_.save_chunk_end(r.id, r.n_computed, int64_t(r.prompt.size()), r.tail_checkpoint);
    }
}

void Engine::record_step() {
    last_ = EngineStepStats{};
    last_.n_seqs = int32_t(plan_.scheduled.size());
    last_.n_tokens = plan_.total_tokens;
    for (const auto& s : plan_.scheduled) {
        const bool decode = s.n_tokens == 1 && !s.req->output.empty() && !s.fresh;
        last_.n_decode_seqs += decode;
        last_.n_prefill_tokens += decode ? 0 : s.n_tokens;
    }
    last_.n_preempted = int32_t(plan_.preempted.size());
    last_.attn_output_copies = ex_.counters.attn_output_copies;
    last_.heap_allocations = ex_.counters.heap_allocations;
}

void Engine::finish_step(double t0_ms, uint64_t allocs_before) {
    last_.n_running = sched_.n_running();
    last_.n_waiting = sched_.n_waiting();
    last_.blocks_used = cache_.blocks().n_total() - cache_.blocks().n_free();
    last_.slots_used = cache_.slots().n_total() - cache_.slots().n_free();
    last_.step_ms = event_clock_ms() - t0_ms;
    last_.step_heap_allocations = int64_t(thread_alloc_count() + pool_.worker_alloc_count() - allocs_before);
    update_snapshot(true);
}

void Engine::update_snapshot(bool ran) {
    std::lock_guard<std::mutex> lk(stats_mu_);
    snap_.n_running = sched_.n_running();
    snap_.n_waiting = sched_.n_waiting();
    snap_.blocks_total = cache_.blocks().n_total();
    snap_.blocks_used = snap_.blocks_total - cache_.blocks().n_free();
    snap_.slots_total = cache_.slots().n_total();
    snap_.slots_used = snap_.slots_total - cache_.slots().n_free();
    snap_.preemptions = total_preemptions_;
    snap_.fair_preemptions = sched_.fair_preemptions();
    snap_.prefix_queries = sched_.prefix_queries();
    snap_.prefix_hits = sched_.prefix_hits();
    snap_.blocks_cached = cache_.blocks().n_cached();
    snap_.checkpoints = ckpt_.size();
    snap_.checkpoints_total = sizing_.n_checkpoints;
    snap_.checkpoint_bytes = ckpt_.bytes_used();
    snap_.checkpoints_saved = ckpt_.n_saved();
    if (!ran) return;
    ++snap_.steps;
    snap_.prompt_tokens_computed += last_.n_prefill_tokens;
    snap_.generated_tokens += int64_t(sample_reqs_.size());
    snap_.attn_output_copies += last_.attn_output_copies;
    snap_.forward_heap_allocations += last_.heap_allocations;
    snap_.step_heap_allocations += last_.step_heap_allocations;
    snap_.last = last_;
}

EngineSnapshot Engine::snapshot() const {
    std::lock_guard<std::mutex> lk(stats_mu_);
    EngineSnapshot s = snap_;
    if (s.blocks_total == 0) {   // before the first step
        s.checkpoints_total = sizing_.n_checkpoints;
        s.blocks_total = cache_.blocks().n_total();
        s.slots_total = cache_.slots().n_total();
    }
    s.cache_bytes = sizing_.total_bytes();
    s.checkpoint_capacity_bytes = int64_t(sizing_.n_checkpoints) * sizing_.slot_bytes;
    return s;
}

void Engine::run_until_idle() {
    while (step()) {}
}

void Engine::start() {
    stop_ = false;
    loop_ = std::thread([this] {
        for (;;) {
            {
                std::unique_lock<std::mutex> lk(inbox_mu_);
                inbox_cv_.wait(lk, [&] {
                    return stop_ || !inbox_.empty() || !cancels_.empty() || cancel_flagged_ || sched_.has_work();
                });
                if (stop_) return;
            }
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
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        stop_ = true;
    }
    inbox_cv_.notify_all();
    if (loop_.joinable()) loop_.join();
}

}   // namespace kimi
