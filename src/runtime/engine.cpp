// Engine implementation (see engine.h).
#include "runtime/engine.h"

#include <algorithm>
#include <chrono>

#include "core/rng.h"

namespace kimi {

namespace {
double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int32_t resolve_max_len(const KimiLinearModel& m, const EngineConfig& c) {
    if (c.max_model_len > 0) return c.max_model_len;
    const int64_t model_max = m.config().max_position_embeddings;
    return int32_t(model_max > 0 ? std::min<int64_t>(model_max, 4096) : 4096);
}
int32_t blocks_per_seq(int32_t max_len, int32_t bs) { return (max_len + bs - 1) / bs; }
}  // namespace

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
}

Engine::Engine(const KimiLinearModel& model, const EngineConfig& cfg)
    : model_(model),
      cfg_(cfg),
      max_model_len_(resolve_max_len(model, cfg)),
      pool_(cfg.threads),
      storage_(model.cache_geometry(cfg.max_num_seqs, n_blocks_for(cfg, max_model_len_), cfg.block_size)),
      cache_(n_blocks_for(cfg, max_model_len_), cfg.block_size, cfg.max_num_seqs, blocks_per_seq(max_model_len_, cfg.block_size)),
      sched_(SchedulerConfig{cfg.max_num_seqs, cfg.max_num_batched_tokens}, cache_),
      runner_(model, storage_, cache_),
      sampler_(model.config().vocab_size) {
    ex_.pool = &pool_;
    ex_.arena = &arena_;
    ex_.precision = cfg.precision;
    ex_.attn_output = cfg.attn_output;
    live_.reserve(size_t(cfg.max_num_seqs) * 4);
}

Engine::~Engine() { stop(); }

int32_t Engine::n_blocks_for(const EngineConfig& c, int32_t max_len) {
    // Never fewer than one full-length sequence needs, so any admissible request fits alone.
    const int32_t one = blocks_per_seq(max_len, c.block_size);
    return c.n_blocks > 0 ? std::max(c.n_blocks, one) : c.max_num_seqs * one;
}

std::shared_ptr<RequestStream> Engine::submit(std::vector<int32_t> prompt, const SamplingParams& params) {
    if (prompt.empty()) throw Error("the prompt is empty");
    for (int32_t id : prompt)
        if (id < 0 || id >= model_.config().vocab_size)
            throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(model_.config().vocab_size) + ")");
    if (params.max_tokens < 1) throw Error("max_tokens must be at least 1");
    if (int64_t(prompt.size()) + params.max_tokens > max_model_len_)
        throw Error("prompt (" + std::to_string(prompt.size()) + " tokens) + max_tokens (" + std::to_string(params.max_tokens) +
                    ") exceeds max-model-len " + std::to_string(max_model_len_));
    auto live = std::make_unique<Live>();
    live->stream = std::make_shared<RequestStream>();
    live->req.prompt = std::move(prompt);
    live->req.params = params;
    live->req.output.reserve(size_t(params.max_tokens));
    live->stream->events_.reserve(size_t(params.max_tokens) + 1);
    live->t0_ms = now_ms();
    std::shared_ptr<RequestStream> s = live->stream;
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        live->req.id = next_id_++;
        live->req.arrival_seq = int64_t(live->req.id);
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
    e.time_ms = now_ms() - l.t0_ms;
    l.stream->push(std::move(e));
}

bool Engine::step() {
    admit_pending();
    sched_.schedule(plan_);
    for (Request* r : sched_.finished()) {   // aborts
        auto it = live_.find(r->id);
        publish_finish(*it->second, FinishReason::kAbort);
        live_.erase(it);
    }
    sched_.finished().clear();
    if (plan_.scheduled.empty()) return false;

    const double t0 = now_ms();
    const Tensor logits = runner_.execute(ex_, plan_, sample_reqs_);
    sched_.step_done(plan_);
    last_ = EngineStepStats{};
    last_.n_seqs = int32_t(plan_.scheduled.size());
    last_.n_tokens = plan_.total_tokens;
    for (const auto& s : plan_.scheduled) {
        const bool decode = s.n_tokens == 1 && !s.req->output.empty() && !s.fresh;
        last_.n_decode_seqs += decode;
        last_.n_prefill_tokens += decode ? 0 : s.n_tokens;
    }
    last_.attn_output_copies = ex_.counters.attn_output_copies;
    last_.heap_allocations = ex_.counters.heap_allocations;

    const int64_t vocab = model_.config().vocab_size;
    const int32_t eos = model_.config().eos_token_id;
    for (size_t i = 0; i < sample_reqs_.size(); ++i) {
        Request& r = *sample_reqs_[i];
        Live& l = *live_.at(r.id);
        TokenEvent e;
        SampledToken tok;
        if (r.params.logprobs >= 0) tok.top.reserve(size_t(r.params.logprobs));
        sampler_.sample(std::span<const float>(logits.f32() + int64_t(i) * vocab, size_t(vocab)), r.params, r.prompt, r.output,
                        r.seed, r.output.size(), tok);
        r.output.push_back(tok.token);
        e.token = tok.token;
        e.logprob = tok.logprob;
        e.top = std::move(tok.top);
        e.time_ms = now_ms() - l.t0_ms;
        FinishReason why = FinishReason::kNone;
        const bool stop_id = std::find(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end(), tok.token) !=
                             r.params.stop_token_ids.end();
        if ((!r.params.ignore_eos && tok.token == eos) || stop_id) why = FinishReason::kStop;
        else if (int32_t(r.output.size()) >= r.params.max_tokens || r.num_tokens() >= max_model_len_) why = FinishReason::kLength;
        e.finish = why;
        l.stream->push(std::move(e));
        if (why != FinishReason::kNone) {
            sched_.finish(&r, why);
            live_.erase(r.id);
        }
    }
    last_.step_ms = now_ms() - t0;
    return true;
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
            step();
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
