// Engine: owns the cache (storage + bookkeeping), scheduler, runner and output processing of
// one loaded model. submit() may be called from any thread and returns a stream of token
// events (request_stream.h); step() runs one scheduler step: schedule → run the model →
// postprocess (sample, stop checks, publish: output_processor.h); start() runs steps on a
// background thread that sleeps when idle.
// ref: docs/runtime.md#engine, vLLM v1 EngineCore.step(), nano-vllm LLMEngine.step().
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_manager.h"
#include "cache/cache_storage.h"
#include "cache/checkpoint_planner.h"
#include "cache/checkpoint_store.h"
#include "model/kimi_model.h"
#include "runtime/cache_sizing.h"
#include "runtime/engine_config.h"
#include "runtime/engine_stats.h"
#include "runtime/live_request.h"
#include "runtime/model_runner.h"
#include "runtime/output_processor.h"
#include "runtime/request_stream.h"
#include "runtime/scheduler.h"
#include "runtime/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace kimi {

// submit() on an engine that can no longer run (a step failed for good: a lost MPI rank, an
// internal error): the server answers 503.
struct EngineFailed : Error {
    using Error::Error;
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
    // media: the prompt's images (K3 vision; request.h MediaSpan), by offset.
    std::shared_ptr<RequestStream> submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                          std::shared_ptr<StreamNotifier> notifier = nullptr, uint64_t group = 0,
                                          std::span<const MediaSpan> media = {});
    // One sequence for submit_all(): its prompt, parameters and images, read before submit_all returns.
    struct Submission {
        std::span<const int32_t> prompt;
        const SamplingParams* params = nullptr;
        std::span<const MediaSpan> media = {};
    };
    // The sequences of one client request, all or none: if one cannot be submitted (kimi::Error
    // as submit(), EngineFailed, std::bad_alloc), none was, and what was made for them is freed
    // before this throws; the engine never sees them. Streams in the order of `reqs`.
    std::vector<std::shared_ptr<RequestStream>> submit_all(std::span<const Submission> reqs,
                                                           std::shared_ptr<StreamNotifier> notifier, uint64_t group);
    uint64_t new_group();
    void cancel(uint64_t id);
    // Cancels the request of this stream. Allocates nothing and never throws (it runs on error
    // paths and in destructors): the engine looks for flagged streams at its next step.
    void cancel(RequestStream& stream) noexcept;

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
    void start();   // background loop
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

    // The phases of a step (run_step).
    bool schedule();      // admit, plan into plan_, end aborts; false: nothing to run
    Tensor run_model();   // the forward of plan_ with its prefix-cache checkpoints
    void record_step();   // last_ from plan_ and the forward (before postprocess)
    void finish_step(double t0_ms, uint64_t allocs_before);   // last_'s end-of-step counts, snapshot

    // submit() and submit_all(): a checked request with its buffers reserved, not yet queued ...
    std::unique_ptr<LiveRequest> make_live(std::vector<int32_t> prompt, std::span<const MediaSpan> media,
                                           const SamplingParams& params, std::shared_ptr<StreamNotifier> notifier);
    // ... then all of them queued, or none (std::bad_alloc); each gets its id.
    void enqueue(std::span<std::unique_ptr<LiveRequest>> lives, uint64_t group);
    void admit_pending();
    // Prefix cache: KDA checkpoints inside this step's chunks (captured by the forward pass),
    // then those at the chunks' ends (checkpoint_planner.h).
    void plan_captures();
    void save_checkpoints();
    bool run_step();   // step() without its failure handling
    // Every request in flight (queued ones too) ends with this error; allocates nothing.
    void fail_all(const std::shared_ptr<const std::string>& why);
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
    CheckpointStore ckpt_;          // KDA checkpoints of the prefix cache (capacity 0 when off)
    CheckpointPlanner ckpt_plan_;   // where they are taken
    Scheduler sched_;
    ModelRunner runner_;
    OutputProcessor outputs_;
    ScheduleOutput plan_;
    std::vector<Request*> sample_reqs_;
    std::mutex vocab_mu_;
    std::unique_ptr<GrammarVocab> grammar_vocab_;   // built at the first structured request
    EngineStepStats last_;
    int64_t total_preemptions_ = 0;
    int64_t prefix_hit_tokens_ = 0;   // tokens admitted from the prefix cache, all requests
    mutable std::mutex stats_mu_;
    EngineSnapshot snap_;   // updated at the end of every step, under stats_mu_

    mutable std::mutex inbox_mu_;
    std::condition_variable inbox_cv_;
    std::vector<std::unique_ptr<LiveRequest>> inbox_;
    std::vector<uint64_t> cancels_;
    bool cancel_flagged_ = false;   // cancel(RequestStream&) flagged a stream since the last admission
    uint64_t next_id_ = 1;
    LiveRequests live_;
    std::thread loop_;
    bool stop_ = false;
    std::string failure_;   // under inbox_mu_
    // The error of requests failed by a step that ran out of memory: made at start, as
    // nothing can be allocated then.
    const std::shared_ptr<const std::string> oom_error_ =
        std::make_shared<const std::string>("the server ran out of memory while running this request");
};

}   // namespace kimi
