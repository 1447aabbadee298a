// Engine: owns the cache (storage + bookkeeping), scheduler, runner and sampler of one
// loaded model. submit() may be called from any thread and returns a stream of token
// events; step() runs one scheduler step (schedule → forward → sample → stop checks →
// publish); start() runs steps on a background thread that sleeps when idle.
// ref: docs/runtime.md#engine, vLLM v1 EngineCore.step().
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/cache_manager.h"
#include "cache/cache_storage.h"
#include "model/kimi_model.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"
#include "runtime/structured_output.h"
#include "runtime/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace kimi {

struct EngineConfig {
    int threads = 1;
    Precision precision = Precision::kBF16;
    AttnOutputMode attn_output = AttnOutputMode::kDirect;
    int32_t max_num_seqs = 8;
    int32_t max_num_batched_tokens = 256;
    int32_t max_model_len = 0;        // 0: min(model_max_length, 4096)
    int32_t block_size = 16;
    bool kv_cache_bf16 = false;       // MLA latents stored as bf16 (half the cache bytes)
    // MLA cache blocks: n_blocks if > 0 (tests); else as many as fit in cache_memory_bytes
    // after the KDA state slots; else (both 0) enough for max_num_seqs full-length sequences.
    int32_t n_blocks = 0;
    int64_t cache_memory_bytes = 0;
    // Prefix caching (docs/runtime.md): full MLA blocks named by the hash chain of their prefix;
    // KDA state checkpoints at every multiple of prefix_checkpoint_interval tokens (rounded up
    // to whole blocks; 0: kDefaultCheckpointInterval), at every prompt's last full block (and
    // the one before its last token), and at each sequence's latest full block past its prompt —
    // taken inside a step, so the
    // schedule is unchanged — kept in prefix_cache_memory_bytes (0: default_prefix_cache_bytes()).
    static constexpr int32_t kDefaultCheckpointInterval = 256;
    bool enable_prefix_caching = true;
    int32_t prefix_checkpoint_interval = 0;
    int64_t prefix_cache_memory_bytes = 0;
};

// What the engine sized its cache to (printed at start by the commands).
struct CacheSizing {
    int32_t n_slots = 0, n_blocks = 0, block_size = 0, max_model_len = 0;
    int64_t slot_bytes = 0, block_bytes = 0;   // one slot (all KDA layers), one block (all MLA layers)
    bool prefix_caching = false;
    int32_t n_checkpoints = 0, checkpoint_interval = 0;   // KDA checkpoints of slot_bytes each
    int64_t total_bytes() const { return int64_t(n_slots) * slot_bytes + int64_t(n_blocks) * block_bytes; }
    int64_t cached_tokens() const { return int64_t(n_blocks) * block_size; }
    std::string describe() const;
};

// The prefix cache's default KDA checkpoint memory: eight checkpoints per sequence slot, at
// most an eighth of the memory available now.
int64_t default_prefix_cache_bytes(int64_t slot_bytes, int32_t max_num_seqs);

struct TokenEvent {
    int32_t token = -1;               // -1 on a final event that carries no token (abort)
    std::string text;                 // text that became final with this event (with a tokenizer)
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;
    FinishReason finish = FinishReason::kNone;
    int32_t stop_index = -1;          // finish == kStop by a stop string: its index in params.stop
    double time_ms = 0.0;             // since submission
    int64_t cached_tokens = 0;        // prompt tokens the request took from the prefix cache
    std::string error;                // finish == kAbort because the engine failed it: why
};

// submit() on an engine that can no longer run (a step failed for good: a lost MPI rank, an
// internal error): the server answers 503.
struct EngineFailed : Error {
    using Error::Error;
};

// Wakes one consumer that follows several streams (n > 1 choices, several prompts): every
// event pushed to a stream attached to it bumps a sequence number.
class StreamNotifier {
public:
    void notify();
    // Waits until the sequence number differs from `seen` or `timeout` passes; updates `seen`.
    void wait_for(uint64_t& seen, std::chrono::milliseconds timeout);

private:
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t seq_ = 0;
};

// The consumer side of one request: events in order, the last has finish != kNone.
class RequestStream {
public:
    uint64_t id() const { return id_; }
    bool next(TokenEvent& out);       // blocks; false once the final event was taken
    bool try_next(TokenEvent& out);   // does not block; false if no event is ready
private:
    friend class Engine;
    void push(TokenEvent&& e);
    uint64_t id_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<TokenEvent> events_;
    size_t read_ = 0;
    bool closed_ = false;
    std::shared_ptr<StreamNotifier> notifier_;
};

struct EngineStepStats {
    int32_t n_seqs = 0, n_tokens = 0, n_prefill_tokens = 0, n_decode_seqs = 0;
    int32_t n_running = 0, n_waiting = 0, n_preempted = 0;  // after scheduling
    int32_t blocks_used = 0, slots_used = 0;
    double step_ms = 0.0;
    int64_t attn_output_copies = 0, heap_allocations = 0;   // forward pass, all threads
    int64_t step_heap_allocations = 0;                      // the whole step (schedule → publish)
};

// A consistent, thread-safe copy of the engine's counters (for /metrics).
struct EngineSnapshot {
    int32_t n_running = 0, n_waiting = 0;
    int32_t blocks_used = 0, blocks_total = 0, slots_used = 0, slots_total = 0;
    int64_t steps = 0, prompt_tokens_computed = 0, generated_tokens = 0, preemptions = 0;
    int64_t fair_preemptions = 0;   // sequences preempted to share the batch between client requests
    int64_t attn_output_copies = 0, forward_heap_allocations = 0, step_heap_allocations = 0;
    // Prefix cache: prompt tokens looked up and served at first admission, cached (ref 0) MLA
    // blocks, KDA checkpoints resident / capacity and their bytes, checkpoints written.
    int64_t prefix_queries = 0, prefix_hits = 0;
    int32_t blocks_cached = 0, checkpoints = 0, checkpoints_total = 0;
    int64_t checkpoint_bytes = 0, checkpoints_saved = 0;
    // Memory the engine holds from start to end: the KV/state cache and the checkpoint capacity.
    int64_t cache_bytes = 0, checkpoint_capacity_bytes = 0;
    EngineStepStats last;
};

class Engine {
public:
    // tokenizer (optional, must outlive the engine): text pieces in events and stop strings.
    // Throws kimi::Error if the cache cannot be sized (cache_memory_bytes too small).
    Engine(const KimiModel& model, const EngineConfig& cfg, const tok::Tokenizer* tokenizer = nullptr);
    ~Engine();

    // Throws kimi::Error if the request can never run (empty, ids out of range, too long).
    // notifier (optional) is woken on every event of this request. group (from new_group();
    // 0: a group of its own) ties the sequences of one client request together, so the
    // scheduler shares the batch fairly between client requests (scheduler.h).
    std::shared_ptr<RequestStream> submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                          std::shared_ptr<StreamNotifier> notifier = nullptr, uint64_t group = 0);
    uint64_t new_group();
    void cancel(uint64_t id);

    // A model split over MPI ranks (KimiModel::shard): rank 0's engine schedules, samples and
    // publishes; every other rank builds the same engines in the same order and calls follow()
    // once, which runs each forward step rank 0's engines run, until all of them are destroyed.
    void follow();
    bool leads() const { return !model_.shard().split() || model_.shard().rank == 0; }

    // false if there was nothing to do. Memory running out inside a step fails the requests
    // in flight (their streams end with TokenEvent::error) and the engine goes on; any other
    // exception fails them and the engine for good (failure()), then is rethrown.
    bool step();
    // Why the engine stopped running requests for good; empty while it is healthy. Thread-safe.
    std::string failure() const;
    void run_until_idle();
    void start();                     // background loop
    void stop();

    const EngineStepStats& last_step() const { return last_; }
    // Tokens requests started from instead of computing (prefix-cache hits), since start-up.
    int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
    int64_t total_preemptions() const { return total_preemptions_; }
    EngineSnapshot snapshot() const;   // thread-safe
    const CacheSizing& sizing() const { return sizing_; }
    Precision precision() const { return ex_.precision; }
    const EngineConfig& config() const { return cfg_; }
    int32_t max_model_len() const { return sizing_.max_model_len; }
    const CacheManager& cache() const { return cache_; }
    const CheckpointStore& checkpoints() const { return ckpt_; }

private:
    // vLLM's profile run: one forward of a full token budget at start-up (a dummy sequence in
    // state slot 0 and the first blocks, both overwritten by any later request), so the step
    // arena, the kernels' per-thread scratch and the weights' pages are in place before the
    // first request: steady-state steps then fault in no pages and allocate nothing.
    void profile_run();

    struct Live {
        Request req;
        std::shared_ptr<RequestStream> stream;
        std::unique_ptr<TextStream> text;
        std::vector<std::vector<std::pair<int32_t, float>>> top_pool;   // reserved at submit: no allocation per token
        std::unique_ptr<GrammarState> grammar;   // structured output (params.structured)
        double t0_ms = 0.0;
    };
    void admit_pending();
    // Prefix cache: KDA checkpoints inside this step's chunks (captured by the forward pass),
    // named once the step's blocks are; then those at the chunks' ends.
    void plan_captures();
    void commit_captures();
    void save_checkpoints();
    void publish_finish(Live& l, FinishReason why);
    bool run_step();                      // step() without its failure handling
    void fail_all(const std::string& why);   // every request in flight ends with this error
    void update_snapshot(bool ran);

    const KimiModel& model_;
    const tok::Tokenizer* tok_;
    EngineConfig cfg_;
    CacheSizing sizing_;
    ThreadPool pool_;
    Arena arena_, layer_arena_;
    Exec ex_;
    CacheStorage storage_;
    CacheManager cache_;
    CheckpointStore ckpt_;             // KDA checkpoints of the prefix cache (capacity 0 when off)
    Scheduler sched_;
    ModelRunner runner_;
    Sampler sampler_;
    ScheduleOutput plan_;
    std::vector<Request*> sample_reqs_;
    std::vector<ops::StateCapture> captures_;
    std::vector<uint64_t> capture_hashes_;   // captures_[i] is named capture_hashes_[i]
    std::mutex vocab_mu_;
    std::unique_ptr<GrammarVocab> grammar_vocab_;   // built at the first structured request
    std::vector<uint64_t> mask_;                   // the token mask of the request being sampled
    std::vector<int32_t> end_ids_;
    EngineStepStats last_;
    int64_t total_preemptions_ = 0;
    int64_t prefix_hit_tokens_ = 0;    // tokens admitted from the prefix cache, all requests
    mutable std::mutex stats_mu_;
    EngineSnapshot snap_;              // updated at the end of every step, under stats_mu_

    mutable std::mutex inbox_mu_;
    std::condition_variable inbox_cv_;
    std::vector<std::unique_ptr<Live>> inbox_;
    std::vector<uint64_t> cancels_;
    uint64_t next_id_ = 1;
    std::unordered_map<uint64_t, std::unique_ptr<Live>> live_;
    std::thread loop_;
    bool stop_ = false;
    std::string failure_;              // under inbox_mu_
};

}  // namespace kimi
