// Engine implementation (see engine.h).
#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/alloc_counter.h"
#include "core/mapped_file.h"
#include "core/rng.h"

namespace kimi {

namespace {
double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int32_t resolve_max_len(const KimiModel& m, const EngineConfig& c) {
    if (c.max_model_len > 0) return c.max_model_len;
    const int64_t model_max = m.config().max_position_embeddings;
    return int32_t(model_max > 0 ? std::min<int64_t>(model_max, 4096) : 4096);
}
std::string human_bytes(int64_t bytes) {
    char buf[32];
    if (bytes < (int64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
    else if (bytes < (int64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
    else std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

CacheSizing size_cache(const KimiModel& m, const EngineConfig& c) {
    if (c.max_num_seqs < 1) throw Error("max-num-seqs must be at least 1");
    if (c.max_num_batched_tokens < 1) throw Error("max-num-batched-tokens must be at least 1");
    if (c.block_size < 1 || c.block_size > 4096) throw Error("block-size must be in [1, 4096]");
    if (c.max_model_len < 0) throw Error("max-model-len must be positive");
    CacheSizing z;
    z.max_model_len = resolve_max_len(m, c);
    z.block_size = c.block_size;
    z.n_slots = c.max_num_seqs;
    const CacheGeometry g = m.cache_geometry(1, 1, c.block_size, c.kv_cache_bf16);
    z.slot_bytes = g.bytes_per_slot();
    z.block_bytes = g.bytes_per_block();
    if (c.prefix_checkpoint_interval < 0) throw Error("prefix-checkpoint-interval must be >= 0");
    if (c.prefix_cache_memory_bytes < 0) throw Error("prefix-cache-memory must be >= 0");
    z.prefix_caching = c.enable_prefix_caching;
    if (z.prefix_caching) {
        const int32_t want = c.prefix_checkpoint_interval > 0 ? c.prefix_checkpoint_interval : EngineConfig::kDefaultCheckpointInterval;
        z.checkpoint_interval = (want + c.block_size - 1) / c.block_size * c.block_size;
        const int64_t budget = c.prefix_cache_memory_bytes > 0 ? c.prefix_cache_memory_bytes
                                                                : default_prefix_cache_bytes(z.slot_bytes, c.max_num_seqs);
        const int64_t avail = int64_t(memory_available_bytes());
        if (avail > 0 && budget > avail)
            throw Error("prefix-cache-memory " + human_bytes(budget) + " is more than the memory available (" +
                        human_bytes(avail) + ")");
        // No recurrent layers: a checkpoint holds nothing (64 per sequence slot).
        z.n_checkpoints = int32_t(std::min<int64_t>(z.slot_bytes > 0 ? budget / z.slot_bytes : int64_t(c.max_num_seqs) * 64, 1 << 24));
    }
    // Never fewer blocks than one full-length sequence needs, so any admissible request fits alone.
    const int32_t one = (z.max_model_len + c.block_size - 1) / c.block_size;
    if (c.n_blocks > 0) {
        z.n_blocks = std::max(c.n_blocks, one);
    } else if (c.cache_memory_bytes > 0 && z.block_bytes > 0) {
        const int64_t for_blocks = c.cache_memory_bytes - int64_t(z.n_slots) * z.slot_bytes;
        const int64_t n = for_blocks > 0 ? for_blocks / z.block_bytes : 0;
        if (n < one)
            throw Error("cache-memory " + human_bytes(c.cache_memory_bytes) + " is too small: the KDA state of " +
                        std::to_string(z.n_slots) + " sequences (max-num-seqs) takes " +
                        human_bytes(int64_t(z.n_slots) * z.slot_bytes) + " and one max-model-len (" +
                        std::to_string(z.max_model_len) + ") sequence needs " + human_bytes(int64_t(one) * z.block_bytes) +
                        " of MLA cache; lower max-num-seqs or max-model-len, or give more");
        z.n_blocks = int32_t(std::min<int64_t>(n, int64_t(1) << 30));
    } else {
        z.n_blocks = c.max_num_seqs * one;
    }
    // A split model: every rank sizes its cache as rank 0 did (available memory may differ).
    if (m.shard().split()) dist::Comm::world().broadcast(&z, sizeof z);
    return z;
}
}  // namespace

int64_t default_prefix_cache_bytes(int64_t slot_bytes, int32_t max_num_seqs) {
    const int64_t want = 8 * int64_t(std::max(max_num_seqs, 1)) * std::max<int64_t>(slot_bytes, 4);
    const int64_t avail = int64_t(memory_available_bytes());
    return avail > 0 ? std::min(want, avail / 8) : want;
}

std::string CacheSizing::describe() const {
    std::string s = "cache: " + std::to_string(n_slots) + " state slots x " + human_bytes(slot_bytes) + " (KDA) + " +
                    std::to_string(n_blocks) + " blocks x " + std::to_string(block_size) + " tokens (" +
                    std::to_string(cached_tokens()) + " tokens of MLA cache, " + human_bytes(int64_t(n_blocks) * block_bytes) +
                    ") = " + human_bytes(total_bytes()) + "; max-model-len " + std::to_string(max_model_len);
    if (!prefix_caching) return s + "; prefix cache off";
    return s + "; prefix cache on: " + std::to_string(n_checkpoints) + " KDA checkpoints x " + human_bytes(slot_bytes) +
           " = " + human_bytes(int64_t(n_checkpoints) * slot_bytes) + " (--prefix-cache-memory), every " +
           std::to_string(checkpoint_interval) + " tokens and at each prompt's and reply's last full block";
}

void StreamNotifier::notify() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        ++seq_;
    }
    cv_.notify_all();
}

void StreamNotifier::wait_for(uint64_t& seen, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return seq_ != seen; });
    seen = seq_;
}

bool RequestStream::try_next(TokenEvent& out) {
    std::lock_guard<std::mutex> lk(mu_);
    if (read_ >= events_.size()) return false;
    out = std::move(events_[read_++]);
    return true;
}

bool RequestStream::next(TokenEvent& out) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return read_ < events_.size() || closed_; });
    if (read_ >= events_.size()) return false;
    out = std::move(events_[read_++]);
    return true;
}

void RequestStream::push(TokenEvent&& e) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        const bool last = e.finish != FinishReason::kNone;
        events_.push_back(std::move(e));
        if (last) closed_ = true;
    }
    cv_.notify_all();
    if (notifier_) notifier_->notify();
}

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
      sched_(SchedulerConfig{cfg.max_num_seqs, cfg.max_num_batched_tokens}, cache_, &ckpt_),
      runner_(model, storage_, cache_, &ckpt_),
      sampler_(model.config().vocab_size) {
    ex_.pool = &pool_;
    ex_.arena = &arena_;
    ex_.layer_arena = &layer_arena_;
    ex_.precision = cfg.precision;
    ex_.attn_output = cfg.attn_output;
    live_.reserve(size_t(cfg.max_num_seqs) * 4);
    captures_.reserve(size_t(sizing_.n_checkpoints));
    capture_hashes_.reserve(size_t(sizing_.n_checkpoints));
    // The salt of the block hashes: what else shapes the cached values.
    if (sizing_.prefix_caching) cache_.enable_prefix_caching(1 + uint64_t(cfg.precision == Precision::kBF16) + 2 * uint64_t(cfg.kv_cache_bf16));
    profile_run();
    if (model.shard().split()) {
        if (model.shard().rank == 0) runner_.lead(dist::Comm::world());
        else runner_.join(ex_);
    }
}

void Engine::follow() {
    KIMI_CHECK(model_.shard().split() && model_.shard().rank != 0, "Engine::follow on a rank that leads");
    ModelRunner::follow_all();
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

// The prompt's own checkpoint positions: its last full block (where a longer prompt that
// starts with it resumes) and the last full block before its last token (where the same prompt
// again resumes: a hit leaves one token to compute); the two differ when the prompt is a whole
// number of blocks.
static std::pair<int64_t, int64_t> prompt_positions(const Request& r, int64_t bs) {
    const int64_t n = int64_t(r.prompt.size());
    return {(n - 1) / bs * bs, n / bs * bs};
}

// Checkpoint positions inside a step's chunk (from, end): every multiple of the interval and
// the prompt's positions. Each is captured by the forward pass into a checkpoint slot unless the
// store already holds that prefix.
void Engine::plan_captures() {
    captures_.clear();
    capture_hashes_.clear();
    if (!cache_.prefix_caching() || sizing_.n_checkpoints == 0) return;
    const int64_t bs = sizing_.block_size, every = sizing_.checkpoint_interval;
    for (size_t i = 0; i < plan_.scheduled.size(); ++i) {
        const ScheduledRequest& s = plan_.scheduled[i];
        Request& r = *s.req;
        const int64_t from = r.n_computed, end = from + s.n_tokens;
        const auto [p1, p2] = prompt_positions(r, bs);
        int64_t extra[2], n_extra = 0;   // the prompt's positions in this chunk, not on the interval
        for (int64_t p : {p1, p2})
            if (p > from && p < end && p % every != 0 && (n_extra == 0 || extra[n_extra - 1] != p)) extra[n_extra++] = p;
        int64_t next = (from / every + 1) * every, k = 0;
        const auto token_at = [&r](int64_t t) { return int32_t(r.token_at(t)); };
        for (;;) {
            const int64_t x = k < n_extra ? extra[k] : INT64_MAX;
            const int64_t at = std::min(next, x);   // in order of position
            if (at >= end) break;
            if (at == x) ++k;
            else next += every;
            const uint64_t h = cache_.hash_through(r.id, at / bs, token_at);
            if (h == 0 || ckpt_.contains(h)) continue;
            const auto slot = ckpt_.begin();
            if (!slot) return;
            captures_.push_back({int32_t(i), int32_t(at - from), *slot});
            capture_hashes_.push_back(h);
        }
    }
}

void Engine::commit_captures() {
    for (size_t i = 0; i < captures_.size(); ++i) ckpt_.commit(captures_[i].slot, capture_hashes_[i]);
}

// After a step, at the end of each chunk on a block boundary: a checkpoint position (interval,
// the prompt's positions) keeps its state; past the prompt, a request keeps one more
// checkpoint that it moves forward block by block (overwriting its own), so the next turn of a
// chat finds the state at the last full block of this one.
void Engine::save_checkpoints() {
    if (!cache_.prefix_caching()) return;
    const int64_t bs = sizing_.block_size;
    for (const auto& s : plan_.scheduled) {
        Request& r = *s.req;
        const int64_t end = r.n_computed;
        if (end == 0 || end % bs != 0) continue;
        const uint64_t h = cache_.prefix_hash(r.id, end / bs);
        if (h == 0) continue;
        const auto [p1, p2] = prompt_positions(r, bs);
        if (end % sizing_.checkpoint_interval == 0 || end == p1 || end == p2) ckpt_.save(h, storage_, cache_.state_slot(r.id));
        else if (end > int64_t(r.prompt.size()) && ckpt_.save(h, storage_, cache_.state_slot(r.id), r.tail_checkpoint))
            r.tail_checkpoint = h;
    }
}

uint64_t Engine::new_group() {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    return next_id_++;   // groups and request ids share one counter: a group never equals another request's id
}

std::shared_ptr<RequestStream> Engine::submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                              std::shared_ptr<StreamNotifier> notifier, uint64_t group) {
    if (prompt.empty()) throw Error("the prompt is empty");
    for (int32_t id : prompt)
        if (id < 0 || id >= model_.config().vocab_size)
            throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(model_.config().vocab_size) + ")");
    if (params.max_tokens < 1) throw Error("max_tokens must be at least 1");
    if (int64_t(prompt.size()) + params.max_tokens > sizing_.max_model_len)
        throw Error("prompt (" + std::to_string(prompt.size()) + " tokens) + max_tokens (" + std::to_string(params.max_tokens) +
                    ") exceeds max-model-len " + std::to_string(sizing_.max_model_len));
    if (!params.stop.empty() && !tok_) throw Error("stop strings need a tokenizer");
    for (const auto& s : params.stop)
        if (s.empty()) throw Error("stop strings must not be empty");
    if (params.structured && !tok_) throw Error("structured output needs a tokenizer");
    if (const std::string why = failure(); !why.empty()) throw EngineFailed("the engine is not running requests any more: " + why);
    auto live = std::make_unique<Live>();
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
    if (tok_) live->text = std::make_unique<TextStream>(*tok_, live->req.params.stop, params.skip_special_tokens,
                                                    params.include_stop_str_in_output, params.keep_special_ids);
    live->req.prompt = std::move(prompt);
    live->req.output.reserve(size_t(params.max_tokens));
    if (params.logprobs > 0) {
        live->top_pool.resize(size_t(params.max_tokens));
        for (auto& v : live->top_pool) v.reserve(size_t(std::min<int64_t>(params.logprobs, model_.config().vocab_size)));
    }
    live->stream->events_.reserve(size_t(params.max_tokens) + 1);
    live->t0_ms = now_ms();
    std::shared_ptr<RequestStream> s = live->stream;
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        live->req.id = next_id_++;
        live->req.arrival_seq = int64_t(live->req.id);
        live->req.group = group != 0 ? group : live->req.id;
        // A request without a seed gets one derived from its id: reproducible per process.
        live->req.seed = params.seed ? *params.seed : Rng(live->req.id * 0x9e3779b97f4a7c15ull).next();
        s->id_ = live->req.id;
        inbox_.push_back(std::move(live));
    }
    inbox_cv_.notify_one();
    return s;
}

void Engine::cancel(uint64_t id) {
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        cancels_.push_back(id);
    }
    inbox_cv_.notify_one();
}

void Engine::admit_pending() {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    for (auto& l : inbox_) {
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
}

void Engine::publish_finish(Live& l, FinishReason why) {
    TokenEvent e;
    e.finish = why;
    if (l.text) l.text->finish(e.text);
    e.time_ms = now_ms() - l.t0_ms;
    e.cached_tokens = l.req.n_cached_tokens;
    l.stream->push(std::move(e));
}

bool Engine::step() {
    try {
        return run_step();
    } catch (const std::bad_alloc&) {
        fail_all("the server ran out of memory while running this request");
        return true;
    } catch (const std::exception& e) {
        {
            std::lock_guard<std::mutex> lk(inbox_mu_);
            failure_ = e.what();
        }
        fail_all(std::string("the engine failed: ") + e.what());
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

void Engine::fail_all(const std::string& why) {
    admit_pending();
    for (auto& [id, l] : live_) {
        sched_.finish(&l->req, FinishReason::kAbort);
        TokenEvent e;
        e.finish = FinishReason::kAbort;
        e.error = why;
        e.time_ms = now_ms() - l->t0_ms;
        try {
            l->stream->push(std::move(e));
        } catch (const std::bad_alloc&) {   // its events were reserved at submission; the consumer still sees the end
        }
    }
    live_.clear();
    plan_.clear();
    sample_reqs_.clear();
    update_snapshot(false);
}

bool Engine::run_step() {
    const uint64_t allocs_before = thread_alloc_count() + pool_.worker_alloc_count();
    admit_pending();
    sched_.schedule(plan_);
    for (Request* r : sched_.finished()) {   // aborts
        auto it = live_.find(r->id);
        publish_finish(*it->second, FinishReason::kAbort);
        live_.erase(it);
    }
    sched_.finished().clear();
    total_preemptions_ += int64_t(plan_.preempted.size());
    if (plan_.scheduled.empty()) {
        update_snapshot(false);
        return false;
    }

    const double t0 = now_ms();
    for (const auto& s : plan_.scheduled)
        if (s.fresh && s.restore != 0) prefix_hit_tokens_ += s.req->n_computed;
    runner_.prepare_states(plan_);   // restores first: planning captures may reuse checkpoint slots
    plan_captures();
    const Tensor logits = runner_.execute(ex_, plan_, captures_, sample_reqs_);
    sched_.step_done(plan_);
    commit_captures();
    save_checkpoints();
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

    const int64_t vocab = model_.config().vocab_size;
    const int32_t eos = model_.config().eos_token_id;
    for (size_t i = 0; i < sample_reqs_.size(); ++i) {
        Request& r = *sample_reqs_[i];
        Live& l = *live_.at(r.id);
        TokenEvent e;
        e.cached_tokens = r.n_cached_tokens;
        SampledToken tok;
        if (!l.top_pool.empty()) {
            tok.top = std::move(l.top_pool.back());
            l.top_pool.pop_back();
        }
        const std::span<const float> row(logits.f32() + int64_t(i) * vocab, size_t(vocab));
        if (!l.grammar) {
            sampler_.sample(row, r.params, r.prompt, r.output, r.seed, r.output.size(), tok);
        } else {   // structured output: the unmasked draw when it is allowed and that is exact, else the masked one
            end_ids_.assign(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end());
            end_ids_.push_back(eos);
            bool done = false;
            if (Sampler::mask_can_wait(r.params)) {
                sampler_.sample(row, r.params, r.prompt, r.output, r.seed, r.output.size(), tok);
                done = l.grammar->try_accept(tok.token, end_ids_);
            }
            if (!done) {
                if (!l.grammar->mask(end_ids_, mask_)) {   // nothing can follow (no token can go on with the grammar)
                    sched_.finish(&r, FinishReason::kStop);
                    publish_finish(l, FinishReason::kStop);
                    live_.erase(r.id);
                    continue;
                }
                sampler_.sample(row, r.params, r.prompt, r.output, r.seed, r.output.size(), tok, mask_, 1);
                l.grammar->accept(tok.token);
            }
        }
        r.output.push_back(tok.token);
        e.token = tok.token;
        e.logprob = tok.logprob;
        e.top = std::move(tok.top);
        FinishReason why = FinishReason::kNone;
        if (l.text && l.text->push(tok.token, e.text)) {
            why = FinishReason::kStop;
            e.stop_index = l.text->stop_index();
        }
        const bool stop_id = std::find(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end(), tok.token) !=
                             r.params.stop_token_ids.end();
        if (why == FinishReason::kNone) {
            // a grammar's end: its end-of-sequence finishes the request even with ignore_eos
            if (((!r.params.ignore_eos || l.grammar) && tok.token == eos) || stop_id) why = FinishReason::kStop;
            else if (int32_t(r.output.size()) >= r.params.max_tokens || r.num_tokens() >= sizing_.max_model_len)
                why = FinishReason::kLength;
            if (why != FinishReason::kNone && l.text) l.text->finish(e.text);
        }
        e.finish = why;
        e.time_ms = now_ms() - l.t0_ms;
        l.stream->push(std::move(e));
        if (why != FinishReason::kNone) {
            sched_.finish(&r, why);
            live_.erase(r.id);
        }
    }
    last_.n_running = sched_.n_running();
    last_.n_waiting = sched_.n_waiting();
    last_.blocks_used = cache_.blocks().n_total() - cache_.blocks().n_free();
    last_.slots_used = cache_.slots().n_total() - cache_.slots().n_free();
    last_.step_ms = now_ms() - t0;
    last_.step_heap_allocations = int64_t(thread_alloc_count() + pool_.worker_alloc_count() - allocs_before);
    update_snapshot(true);
    return true;
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
    while (step()) {
    }
}

void Engine::start() {
    stop_ = false;
    loop_ = std::thread([this] {
        for (;;) {
            {
                std::unique_lock<std::mutex> lk(inbox_mu_);
                inbox_cv_.wait(lk, [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || sched_.has_work(); });
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

}  // namespace kimi
