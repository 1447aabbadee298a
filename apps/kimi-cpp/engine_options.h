// What every command that serves requests shares: the runtime flags (cache, batching,
// threads, precision), the sampling flags, and loading a model (with load progress) plus
// its tokenizer (the model directory unless --tokenizer says otherwise).
//
// Runtime flags: --max-num-seqs N --max-num-batched-tokens N --max-model-len N
//   --block-size N --cache-memory GiB --kv-cache-dtype auto|bf16|f32, --mmap / --no-mmap (how the
//   weights are held: mapped, or read into huge pages; default: huge pages when the kernel has
//   them and the checkpoint fits), and RunOptions' --threads --activation-dtype --attn-output.
// Sampling flags: -n/--max-tokens N --temperature T --top-k K --top-p P --min-p P
//   --presence-penalty X --frequency-penalty X --repetition-penalty X --seed S
//   --stop TEXT (repeatable) --stop-token-ids 1,2 --logit-bias ID=BIAS (repeatable)
//   --ignore-eos --logprobs N --include-special (special tokens appear in the text).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "args.h"
#include "model/kimi_model.h"
#include "run_options.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace kimi::app {

// The runtime flags. With --activation-dtype auto (the default) the precision is settled by
// with_model_precision once the model is loaded.
struct EngineOptions {
    EngineConfig cfg;
    bool precision_auto = true;
    std::string kv_cache_dtype = "auto";   // --kv-cache-dtype auto|bf16|f32 (auto: the activation precision)
    WeightMemory weight_memory = WeightMemory::kAuto;   // --mmap / --no-mmap
    bool check_weights = true;                          // off: --skip-weight-check (no NaN/Inf sample at load)
    // --tensor-parallel-size N (default and only allowed value: the MPI job's size) and
    // --enable-expert-parallel: this process's part of the model.
    Shard shard;
    // Settles the auto choices for this model: the activation precision and the latent cache dtype.
    void settle(EngineConfig& c, const KimiModel& m) const;
    // cfg, settled; draft: the loaded draft model (load_draft_model) or null.
    EngineConfig with_model_precision(const KimiModel& m, const KimiModel* draft = nullptr) const;
};
// --tensor-parallel-size N (default and only allowed value: the MPI job's size; a clear error
// otherwise) and --enable-expert-parallel.
Shard parse_shard_options(ArgParser& args);
EngineOptions parse_engine_options(ArgParser& args);
SamplingParams parse_sampling_options(ArgParser& args, const SamplingParams& defaults);
// --logit-bias ID=BIAS (repeatable; |BIAS| <= 100), as parse_sampling_options reads it.
std::vector<std::pair<int32_t, float>> parse_logit_bias(ArgParser& args);
void check_sampling_params(const SamplingParams& p);   // throws kimi::Error naming the parameter

// Loads the model, drawing "load [####....]" on a terminal unless quiet.
// Commands that do not run a split model yet (every rank would run the whole command): a clear
// error under mpirun.
void require_one_process(const EngineOptions& o, const char* command);
// Only rank 0 of a split model draws the bar. Then one line with the load time and rate: on a
// terminal, or always with report_load (serve and the benchmarks, whose logs are about time).
std::unique_ptr<KimiModel> load_model_with_progress(const std::string& dir, bool quiet, WeightMemory memory,
                                                    const Shard& shard = {}, bool check_weights = true,
                                                    bool report_load = false);
// The draft of --speculative-config's method draft_model (null for other methods), loaded and
// checked against the target: the same vocabulary size and, where both have one, the same
// tokenizer; an unsplit target. Throws kimi::Error naming what differs.
std::unique_ptr<KimiModel> load_draft_model(const EngineOptions& o, const KimiModel& target,
                                            const std::string& target_dir, bool quiet);
// One stderr line when the checkpoint held tensors the text model does not use (K3 vision).
void note_skipped_tensors(const KimiModel& m, bool quiet);

// The tokenizer in `dir` (tiktoken.model + tokenizer_config.json), or in a GGUF file's
// metadata (tokenizer.ggml.*) when `dir` is one.
tok::Tokenizer load_tokenizer_at(const std::string& dir);
// The same, checked against the model's vocabulary. Returns nullopt only if `dir` has no
// tokenizer and !required; otherwise a missing/bad tokenizer throws.
std::optional<tok::Tokenizer> load_tokenizer_for(const std::string& dir, const ModelConfig& model, bool required);

}   // namespace kimi::app
