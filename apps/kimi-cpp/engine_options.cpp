// Runtime and sampling flags, model + tokenizer loading (see engine_options.h).
#include "engine_options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "checkpoint/gguf_file.h"
#include "core/error.h"
#include "progress.h"
#include "run_options.h"

namespace kimi::app {

namespace {
int32_t bounded(ArgParser& args, const std::string& name, int64_t def, int64_t lo, int64_t hi) {
    return int32_t(args.integer(name, def, lo, hi));
}
void need(bool ok, const std::string& what) {
    if (!ok) throw Error(what);
}
}   // namespace

void EngineOptions::settle(EngineConfig& c, const KimiModel& m) const {
    c.precision = resolve_precision(precision_auto, cfg.precision, m);
    // auto: the latent cache follows the activation precision
    c.kv_cache_bf16 = kv_cache_dtype == "bf16" || (kv_cache_dtype == "auto" && c.precision == Precision::kBF16);
}

EngineConfig EngineOptions::with_model_precision(const KimiModel& m, const KimiModel* draft) const {
    EngineConfig c = cfg;
    settle(c, m);
    c.draft_model = draft;
    return c;
}

namespace {
// Whether the tokenizers in two checkpoints are the same: nullopt when either has none.
std::optional<bool> same_tokenizer(const std::string& a, const std::string& b) {
    std::optional<tok::Tokenizer> ta, tb;
    try {
        ta.emplace(load_tokenizer_at(a));
        tb.emplace(load_tokenizer_at(b));
    } catch (const Error&) {
        return std::nullopt;
    }
    if (ta->n_vocab() != tb->n_vocab()) return false;
    for (int32_t id = 0; id < ta->n_vocab(); ++id)
        if (ta->token_bytes(id) != tb->token_bytes(id)) return false;
    return true;
}
}   // namespace

std::unique_ptr<KimiModel> load_draft_model(const EngineOptions& o, const KimiModel& target,
                                            const std::string& target_dir, bool quiet) {
    const SpeculativeConfig& sc = o.cfg.speculative;
    if (sc.method != SpeculativeConfig::Method::kDraftModel) return nullptr;
    if (target.shard().split()) throw Error("--speculative-config: a draft model runs with an unsplit target only");
    if (!quiet) std::fprintf(stderr, "load: the draft model %s\n", sc.model.c_str());
    auto draft = load_model_with_progress(sc.model, quiet, o.weight_memory, Shard{}, o.check_weights);
    if (draft->config().vocab_size != target.config().vocab_size)
        throw Error("--speculative-config: the draft model's vocab_size (" +
                    std::to_string(draft->config().vocab_size) + ") differs from the target's (" +
                    std::to_string(target.config().vocab_size) + ")");
    const std::optional<bool> same = same_tokenizer(target_dir, sc.model);
    if (same && !*same) throw Error("--speculative-config: the draft model's tokenizer differs from the target's");
    if (!same && !quiet)
        std::fprintf(stderr,
                     "load: no tokenizer to compare in the draft or the target; the vocabularies have the same size\n");
    return draft;
}

Shard parse_shard_options(ArgParser& args) {
    dist::Comm& world = dist::Comm::world();
    const int64_t tp = args.integer("--tensor-parallel-size", world.size());
    if (tp != world.size())
        throw Error(world.size() > 1 ? "--tensor-parallel-size " + std::to_string(tp) + " differs from the " +
                            std::to_string(world.size()) + " processes of this MPI job"
                        : !dist::Comm::mpi_built() ? "--tensor-parallel-size " + std::to_string(tp) +
                            " needs MPI, and this kimi-cpp was built without it"
                                                   : "--tensor-parallel-size " + std::to_string(tp) + " needs " +
                            std::to_string(tp) + " processes: start it with mpirun -np " + std::to_string(tp));
    return Shard{world.rank(), world.size(), args.flag("--enable-expert-parallel")};
}

EngineOptions parse_engine_options(ArgParser& args) {
    const RunOptions run = parse_run_options(args);
    EngineOptions o;
    o.precision_auto = run.precision_auto;
    o.kv_cache_dtype = args.choice("--kv-cache-dtype", "auto", {"auto", "bf16", "f32"});
    const bool pc_on = args.flag("--enable-prefix-caching"), pc_off = args.flag("--no-enable-prefix-caching");
    if (pc_on && pc_off) throw Error("give at most one of --enable-prefix-caching and --no-enable-prefix-caching");
    o.cfg.enable_prefix_caching = !pc_off;   // on by default, as in vLLM v1
    o.cfg.prefix_checkpoint_interval = bounded(args, "--prefix-checkpoint-interval", 0, 0, 1 << 20);
    const double pc_gib = args.real("--prefix-cache-memory", 0.0);
    if (!(pc_gib >= 0.0) || pc_gib > 1 << 20) throw Error("--prefix-cache-memory must be a size in GiB >= 0");
    o.cfg.prefix_cache_memory_bytes = int64_t(pc_gib * 1024.0 * 1024.0 * 1024.0);
    o.shard = parse_shard_options(args);
    const bool mmap = args.flag("--mmap"), no_mmap = args.flag("--no-mmap");
    if (mmap && no_mmap) throw Error("give at most one of --mmap and --no-mmap");
    o.weight_memory = mmap ? WeightMemory::kMmap : no_mmap ? WeightMemory::kCopy : WeightMemory::kAuto;
    o.check_weights = !args.flag("--skip-weight-check");
    EngineConfig& c = o.cfg;
    c.threads = run.threads;
    c.precision = run.precision;
    c.attn_output = run.attn_output;
    c.max_num_seqs = bounded(args, "--max-num-seqs", c.max_num_seqs, 1, 4096);
    c.max_num_batched_tokens = bounded(args, "--max-num-batched-tokens", c.max_num_batched_tokens, 1, 1 << 20);
    c.max_model_len = bounded(args, "--max-model-len", 0, 0, 1 << 24);
    c.block_size = bounded(args, "--block-size", c.block_size, 1, 4096);
    const double gib = args.real("--cache-memory", 0.0);
    if (!(gib >= 0.0) || gib > 1 << 20) throw Error("--cache-memory must be a size in GiB >= 0");
    c.cache_memory_bytes = int64_t(gib * 1024.0 * 1024.0 * 1024.0);
    if (const auto spec = args.opt("--speculative-config",
                                   "JSON, as vLLM's: {\"method\": \"ngram\", \"num_speculative_tokens\": 4, ...}")) {
        c.speculative = parse_speculative_config(*spec);
    }
    c.speculative_max_seqs = bounded(args, "--speculative-max-seqs", 0, 0, 4096);
    if (c.speculative_max_seqs > 0 && !c.speculative.enabled())
        throw Error("--speculative-max-seqs needs --speculative-config");
    return o;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(ArgParser& args) {
    std::vector<std::pair<int32_t, float>> out;
    for (const auto& b : args.list("--logit-bias")) {
        const size_t eq = b.find('=');
        if (eq == std::string::npos) throw Error("--logit-bias wants ID=BIAS, got '" + b + "'");
        const int64_t id = parse_int("--logit-bias id", b.substr(0, eq));
        if (id < 0 || id > INT32_MAX) throw Error("--logit-bias: token id out of range: " + b.substr(0, eq));
        const double bias = parse_real("--logit-bias bias", b.substr(eq + 1));
        if (!(std::fabs(bias) <= 100.0)) throw Error("logit_bias values must be in [-100, 100]");
        out.push_back({int32_t(id), float(bias)});
    }
    return out;
}

SamplingParams parse_sampling_options(ArgParser& args, const SamplingParams& defaults) {
    SamplingParams p = defaults;
    const auto n = args.opt("-n"), m = args.opt("--max-tokens");
    if (n && m) throw Error("give -n or --max-tokens, not both");
    if (n || m)
        p.max_tokens = int32_t(std::clamp<int64_t>(parse_int(n ? "-n" : "--max-tokens", n ? *n : *m), -1, 1 << 24));
    p.temperature = float(args.real("--temperature", p.temperature));
    p.top_k = int32_t(std::clamp<int64_t>(args.integer("--top-k", p.top_k), -1, INT32_MAX));
    p.top_p = float(args.real("--top-p", p.top_p));
    p.min_p = float(args.real("--min-p", p.min_p));
    p.presence_penalty = float(args.real("--presence-penalty", p.presence_penalty));
    p.frequency_penalty = float(args.real("--frequency-penalty", p.frequency_penalty));
    p.repetition_penalty = float(args.real("--repetition-penalty", p.repetition_penalty));
    if (auto s = args.opt("--seed")) {
        const int64_t v = parse_int("--seed", *s);
        if (v < 0) throw Error("--seed must be >= 0");
        p.seed = uint64_t(v);
    }
    for (auto& s : args.list("--stop")) p.stop.push_back(std::move(s));
    if (auto s = args.opt("--stop-token-ids")) p.stop_token_ids = parse_int_list("--stop-token-ids", *s);
    for (const auto& b : parse_logit_bias(args)) p.logit_bias.push_back(b);
    if (args.flag("--ignore-eos")) p.ignore_eos = true;
    if (args.flag("--include-special")) p.skip_special_tokens = false;
    p.logprobs = int32_t(std::clamp<int64_t>(args.integer("--logprobs", p.logprobs), -2, 1 << 20));
    check_sampling_params(p);
    return p;
}

void check_sampling_params(const SamplingParams& p) {
    need(p.max_tokens >= 1, "max_tokens must be at least 1");
    need(std::isfinite(p.temperature) && p.temperature >= 0.0f, "temperature must be >= 0");
    need(p.top_k >= -1, "top_k must be -1, 0 (off) or a positive count");
    need(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p must be in (0, 1]");
    need(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p must be in [0, 1]");
    need(std::isfinite(p.presence_penalty) && std::fabs(p.presence_penalty) <= 2.0f,
         "presence_penalty must be in [-2, 2]");
    need(std::isfinite(p.frequency_penalty) && std::fabs(p.frequency_penalty) <= 2.0f,
         "frequency_penalty must be in [-2, 2]");
    need(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f, "repetition_penalty must be > 0");
    need(p.logprobs >= -1 && p.logprobs <= 20, "logprobs must be in [0, 20]");
    for (const auto& [id, bias] : p.logit_bias)
        need(std::isfinite(bias) && std::fabs(bias) <= 100.0f, "logit_bias values must be in [-100, 100]");
    for (const auto& s : p.stop) need(!s.empty(), "stop strings must not be empty");
}

void require_one_process(const EngineOptions& o, const char* command) {
    if (o.shard.split())
        throw Error(
            std::string(command) +
            " runs in one process for now; a model split over MPI ranks serves through serve, generate and chat");
}

std::unique_ptr<KimiModel> load_model_with_progress(const std::string& dir, bool quiet, WeightMemory memory,
                                                    const Shard& shard, bool check_weights, bool report_load) {
    quiet = quiet || shard.rank != 0;
    Progress bar("load", quiet);
    const auto t0 = std::chrono::steady_clock::now();
    auto m = KimiModel::load(
        dir, [&](uint64_t done, uint64_t total) { bar.update(double(done), double(total), "bytes"); }, memory, shard,
        check_weights);
    bar.finish();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double bytes = double(m->store().tensor_bytes());
    if (!quiet && (report_load || ::isatty(STDERR_FILENO)))
        std::fprintf(stderr, "load: %.2f %s of weights in %.2f s (%.2f GB/s, %s)\n",
                     bytes >= 1073741824.0 ? bytes / 1073741824.0 : bytes / 1048576.0,
                     bytes >= 1073741824.0 ? "GiB" : "MiB", s, bytes / 1e9 / s,
                     file_memory_name(m->store().file_memory()));
    note_skipped_tensors(*m, quiet);
    return m;
}

void note_skipped_tensors(const KimiModel& m, bool quiet) {
    if (quiet || m.store().n_skipped() == 0) return;
    std::fprintf(stderr,
                 "load: skipped %zu tensors outside the text model (%.1f MiB; a vision tower needs the config's "
                 "vision_config)\n",
                 m.store().n_skipped(), double(m.store().skipped_bytes()) / 1048576.0);
}

tok::Tokenizer load_tokenizer_at(const std::string& dir) {
    if (!is_gguf_path(dir)) return tok::Tokenizer::load(dir);
    const GgufFile f(gguf_split_paths(dir).front(), FileMemory::kMapLazy);   // the first part holds the vocabulary
    tok::GgufVocab v;
    v.source = f.path();
    v.model = f.get_string("tokenizer.ggml.model");
    v.pre = f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "default";
    v.tokens = f.get_string_array("tokenizer.ggml.tokens");
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.types.push_back(int32_t(t));
    const auto id = [&](const char* key) { return f.has(key) ? f.get_int(key) : -1; };
    v.bos = id("tokenizer.ggml.bos_token_id");
    v.eos = id("tokenizer.ggml.eos_token_id");
    v.pad = id("tokenizer.ggml.padding_token_id");
    v.unk = id("tokenizer.ggml.unknown_token_id");
    if (f.has("tokenizer.chat_template")) v.chat_template = f.get_string("tokenizer.chat_template");
    return tok::Tokenizer::from_gguf(v);
}

std::optional<tok::Tokenizer> load_tokenizer_for(const std::string& dir, const ModelConfig& model, bool required) {
    struct stat st {};
    if (!is_gguf_path(dir) && ::stat((dir + "/tiktoken.model").c_str(), &st) != 0) {
        if (!required) return std::nullopt;
        throw Error(dir + ": no tokenizer here (tiktoken.model); pass --tokenizer DIR");
    }
    tok::Tokenizer t = load_tokenizer_at(dir);
    // The model's rows: the tokenizer's base tokens and Kimi's 256 special slots, or more (a
    // vocabulary padded for the hardware, a fine-tune's added rows: as vLLM takes any vocab_size
    // at least the tokenizer's); rows past the tokenizer's tokens are never sampled.
    if (int64_t(t.n_base()) + tok::kModelVocabExtra > model.vocab_size)
        throw Error(dir + ": tokenizer has " + std::to_string(t.n_base()) + " base tokens + " +
                    std::to_string(tok::kModelVocabExtra) + " special slots, more than the model's vocab_size " +
                    std::to_string(model.vocab_size));
    return t;
}

}   // namespace kimi::app
