// Engine: owns the cache (storage + bookkeeping), scheduler, runner and output processing of
// one loaded model. submit() may be called from any thread and returns a stream of token
// events (request_stream.h); step() runs one scheduler step: schedule → run the model →
// postprocess (sample, stop checks, publish: output_processor.h), each phase handed what the
// one before made; start() runs steps on a background thread that sleeps when idle. What other
// threads hand it waits in a RequestInbox (request_inbox.h); the counters they read are on a
// StatsBoard (engine_stats.h).
// ref: docs/runtime.md#engine, vLLM v1 EngineCore.step(), nano-vllm LLMEngine.step().
#pragma once
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
#include "runtime/request_inbox.h"
#include "runtime/request_stream.h"
#include "runtime/scheduler.h"
#include "runtime/speculator.h"
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
    const SpecDecodeStats& spec_decode_stats() const { return spec_.stats(); }   // the engine's thread only

private:
    // vLLM's profile run: one forward of a full token budget at start-up (a dummy sequence in
    // state slot 0 and the first blocks, both overwritten by any later request), so the step
    // arena, the kernels' per-thread scratch and the weights' pages are in place before the
    // first request: steady-state steps then fault in no pages and allocate nothing.
    void profile_run();

    // What the forward hands to postprocess: rows[i] samples from logits row i.
    struct ModelOutput {
        Tensor logits;   // [rows.size(), vocab], arena-owned until the next step
        std::span<Request* const> rows;
    };

    // The phases of a step (run_step), each handed what the one before made. The buffers they
    // fill are the engine's (plan_buf_, sample_buf_), reused from step to step; only run_step
    // hands them out (and fail_all empties them).
    bool schedule(ScheduleOutput& plan);   // admit, plan into `plan`, end aborts; false: nothing to run
    // The forward of `plan` with its prefix-cache checkpoints; the rows to sample land in sample_buf.
    ModelOutput run_model(const ScheduleOutput& plan, std::vector<Request*>& sample_buf);
    void record_step(const ScheduleOutput& plan);   // last_ from the plan and the forward (before postprocess)
    // last_'s end-of-step counts, the snapshot; n_sampled: the rows the step sampled.
    void finish_step(double t0_ms, uint64_t allocs_before, int64_t n_sampled);

    // submit() and submit_all(): a checked request with its buffers reserved, not yet queued
    // (then inbox_.enqueue: all of them, or none).
    std::unique_ptr<LiveRequest> make_live(std::vector<int32_t> prompt, std::span<const MediaSpan> media,
                                           const SamplingParams& params, std::shared_ptr<StreamNotifier> notifier);
    // Prefix cache: KDA checkpoints inside the plan's chunks (captured by the forward pass),
    // then those at the chunks' ends (checkpoint_planner.h).
    void plan_captures(const ScheduleOutput& plan);
    void save_checkpoints(const ScheduleOutput& plan);
    void settle_drafts();
    bool run_step();   // step() without its failure handling
    // Every request in flight (queued ones too) ends with this error; allocates nothing.
    void fail_all(const std::shared_ptr<const std::string>& why);

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
    Speculator spec_;
    std::vector<DraftVerdict> verdicts_;   // the step's speculating requests (postprocess → spec_.settle)
    ScheduleOutput plan_buf_;              // the step's plan (schedule → run_model → record_step)
    std::vector<Request*> sample_buf_;     // the rows the step samples (run_model → postprocess)
    std::mutex vocab_mu_;
    std::unique_ptr<GrammarVocab> grammar_vocab_;   // built at the first structured request
    EngineStepStats last_;
    int64_t total_preemptions_ = 0;
    int64_t prefix_hit_tokens_ = 0;                      // tokens admitted from the prefix cache, all requests
    StatsBoard stats_{sched_, cache_, ckpt_, sizing_};   // updated at the end of every step

    // After grammar_vocab_, which the requests' grammar states refer to: they are destroyed first.
    RequestInbox inbox_;
    LiveRequests live_;
    std::thread loop_;
    // The error of requests failed by a step that ran out of memory: made at start, as
    // nothing can be allocated then.
    const std::shared_ptr<const std::string> oom_error_ =
        std::make_shared<const std::string>("the server ran out of memory while running this request");
};

}   // namespace kimi
