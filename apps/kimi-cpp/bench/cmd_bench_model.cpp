// `kimi-cpp bench model`: the llama-bench matrix for one checkpoint, through the real
// engine step. Prefill tokens/s for each --prompt-lens (one step each); decode tokens/s for
// each --batches × --contexts (B sequences with D cached tokens each, all decoding), and for
// every context D > 0 the prefill of each prompt length after D tokens held by the prefix
// cache. For every decode row: the bytes one step reads (weights the batch touches + KDA
// state + MLA latents, runtime/step_traffic.h), the roofline step time at the run's median read
// bandwidth (probed in passes interleaved with the rows; spread reported), and the % of it
// achieved; for prefill, the % of the measured multiply-add peak (attention FLOPs included
// after a context).
// --reps repetitions with min/median/max; a table, --json and --plot. --compare-torch then
// runs the PyTorch eager bf16 baseline over the same matrix and reports the speedup per row.
// --speculative-config adds to every decode row its verification step (1 + k tokens per
// sequence), timed interleaved with the plain steps, the expected tokens/s against acceptance
// and the crossover; and one end-to-end point, plain against speculative (bench_model_spec.h).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "args.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"
#include "bench/plot.h"
#include "bench_model_spec.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "dist/comm.h"
#include "core/rng.h"
#include "decode_cohort.h"
#include "engine_options.h"
#include "machine_limits.h"
#include "runtime/step_traffic.h"
#include "progress.h"
#include "torch_compare.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Page faults and system CPU time of the process so far: a row's delta per step shows
// memory churn (scratch released and faulted in again) and time spent in the kernel.
struct Usage {
    double faults = 0, sys_s = 0;
};
Usage usage_now() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return {double(u.ru_minflt + u.ru_majflt), double(u.ru_stime.tv_sec) + 1e-6 * double(u.ru_stime.tv_usec)};
}

J mmm(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {{"min", v.front()}, {"median", bench::percentile(v, 50)}, {"max", v.back()}};
}

std::vector<int32_t> random_ids(Rng& rng, int64_t n, int64_t vocab) {
    std::vector<int32_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(int32_t(rng.below(uint64_t(vocab))));
    return v;
}

// Steps the engine until every stream has produced `n` tokens (draining events).
void run_until_tokens(Engine& e, std::vector<std::shared_ptr<RequestStream>>& ss, std::vector<int64_t>& got,
                      int64_t n) {
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < ss.size(); ++i) {
            TokenEvent ev;
            while (ss[i]->try_next(ev)) got[i] += ev.token >= 0;
            all &= got[i] >= n;
        }
        if (all) return;
        if (!e.step()) throw Error("internal: the engine went idle early");
    }
}

using Streams = std::vector<std::shared_ptr<RequestStream>>;

// The prompts on one engine, prefilled (untimed) until every sequence decodes.
Streams start_decoding(Engine& e, const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sp) {
    Streams ss;
    for (const auto& p : prompts) ss.push_back(e.submit(p, sp));
    std::vector<int64_t> got(ss.size(), 0);
    run_until_tokens(e, ss, got, 1);
    return ss;
}

void stop_decoding(Engine& e, Streams& ss) {
    for (auto& st : ss) e.cancel(st->id());
    e.run_until_idle();
}

// The seconds of `steps` engine steps, each checked to be a pure decode step of the whole batch
// of b sequences running `tokens` tokens in all (b; b + s·k for a verification step).
double timed_steps(Engine& e, int64_t steps, int32_t b, int32_t tokens) {
    const double t0 = now_s();
    for (int64_t k = 0; k < steps; ++k) {
        e.step();
        const EngineStepStats& st = e.last_step();
        if (st.n_decode_seqs != b || st.n_prefill_tokens != 0)
            throw Error("internal: a measured step was not a pure decode step of the whole batch");
        if (st.n_tokens != tokens)
            throw Error("bench model: a measured step ran " + std::to_string(st.n_tokens) + " tokens, not " +
                        std::to_string(tokens) +
                        (tokens > b ? " (the cache cut the drafts: raise --cache-memory)" : ""));
    }
    return now_s() - t0;
}

// Sequences whose prefill ends early decode while the others still prefill: room for that skew
// (in steps), so that every sequence is still decoding in the measured steps.
int64_t skew_steps(int64_t b, int64_t d, int64_t budget) {
    return (b * std::max<int64_t>(d, 1) + budget - 1) / budget + 2;
}

// What every decode row shares: the engines (verify: the one whose steps verify full drafts,
// with --speculative-config), the bandwidth probe, the progress.
struct DecodeRows {
    Engine& engine;
    Engine* verify;
    const KimiModel& model;
    const EngineConfig& cfg;
    int64_t steps, reps;
    int32_t k, spec_seqs;   // draft tokens; sequences that may speculate in one step
    const ProbeBuffer& probe;
    ThreadPool& pool;
    BandwidthSamples& bws;
    Progress& bar;
    double& done;
    double total;
};

// The plain steps' figures of a row (its `reps` times, the usage and communication of them only).
struct PlainTimes {
    std::vector<double> tps, step_ms;
    Usage usage;
};

// The row's `speculative` object: its verification times against the plain median.
J verify_json(const DecodeRows& R, int32_t b, const std::vector<double>& verify_ms, double plain_ms,
              const SpecDecodeStats& before) {
    const SpecDecodeStats& after = R.verify->spec_decode_stats();
    const int64_t dt = after.draft_tokens - before.draft_tokens;
    const int32_t s = std::min(b, R.spec_seqs);
    const J v = mmm(verify_ms);
    J out = {
        {"k", R.k},
        {"speculating_seqs", s},
        {"verify_tokens_per_step", b + s * R.k},
        {"verify_step_ms", v},
        {"verify_step_includes",
         R.verify->config().draft_model ? "the draft model's catch-up and k - 1 draft steps" : "the ngram lookup"},
        {"verify_acceptance_rate", dt ? double(after.accepted_tokens - before.accepted_tokens) / double(dt) : 0.0}};
    const J curve = speculation_curve(plain_ms, v["median"].get<double>(), b, s, R.k);
    for (const auto& [key, val] : curve.items()) out[key] = val;
    return out;
}

// One decode row: B sequences with D cached tokens each (the first from the prefix cache where a
// prefill row left it), `reps` × `steps` plain steps, and as many verification steps interleaved.
J decode_row(DecodeRows& R, int32_t b, int32_t d, std::vector<std::vector<int32_t>> prompts) {
    sample_bandwidth(R.probe, R.pool, 2, R.bws);
    const double row_gbs = 0.5 * (R.bws.gbs.end()[-1] + R.bws.gbs.end()[-2]);
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = int32_t(1 + R.steps * R.reps + skew_steps(b, d, R.cfg.max_num_batched_tokens));
    Streams ss = start_decoding(R.engine, prompts, sp), vs;
    sp.max_tokens *= R.k + 1;   // a verification may accept every draft token
    if (R.verify) vs = start_decoding(*R.verify, prompts, sp);
    const SpecDecodeStats v0 = R.verify ? R.verify->spec_decode_stats() : SpecDecodeStats{};
    PlainTimes pt;
    std::vector<double> verify_ms;
    dist::Comm& comm = dist::Comm::world();
    comm.reset_stats();   // a split model: rank 0's time in collectives (waiting included) and bytes sent
    for (int64_t r = 0; r < R.reps; ++r) {
        for (int64_t i = 0; i < (R.verify ? 2 : 1); ++i) {   // plain and verify, alternating who goes first
            if (R.verify && (r + i) % 2 == 1) {
                const int32_t tokens = b + std::min(b, R.spec_seqs) * R.k;
                verify_ms.push_back(1e3 * timed_steps(*R.verify, R.steps, b, tokens) / double(R.steps));
                continue;
            }
            const Usage u0 = usage_now();
            const double dt = timed_steps(R.engine, R.steps, b, b);
            const Usage u1 = usage_now();
            pt.usage.faults += u1.faults - u0.faults;
            pt.usage.sys_s += u1.sys_s - u0.sys_s;
            pt.tps.push_back(double(b) * double(R.steps) / dt);
            pt.step_ms.push_back(1e3 * dt / double(R.steps));
        }
        R.bar.update(++R.done, R.total, "runs");
    }
    const double n_steps = double(R.steps * R.reps);
    const double comm_ms = 1e3 * comm.stats().seconds / n_steps;
    const double comm_bytes = double(comm.stats().bytes_sent) / n_steps;
    double wall_s = 0;
    for (double ms : pt.step_ms) wall_s += ms * 1e-3 * double(R.steps);
    stop_decoding(R.engine, ss);
    const StepTraffic tr = decode_step_traffic(R.model, b, d + 1 + R.steps * R.reps / 2, R.cfg.kv_cache_bf16);
    const J s = mmm(pt.tps), st = mmm(pt.step_ms);
    const double ms = st["median"].get<double>();
    J row = {{"test", "tg" + std::to_string(R.steps) + " b" + std::to_string(b) + " @ d" + std::to_string(d)},
             {"batch", b},
             {"context", d},
             {"tokens_per_s", s},
             {"step_ms", st},
             {"bytes_per_step", tr.total_bytes()},
             {"weight_bytes", tr.weight_bytes},
             {"cache_bytes", tr.cache_bytes},
             {"probe_gbs", row_gbs},
             {"page_faults_per_step", pt.usage.faults / n_steps},
             {"sys_pct", 100.0 * pt.usage.sys_s / (wall_s * double(R.cfg.threads))},
             {"compute_ms_per_step", ms - comm_ms},
             {"comm_ms_per_step", comm_ms},
             {"comm_bytes_per_step", comm_bytes},
             {"comm_share", comm_ms / ms}};
    if (R.verify) {
        row["speculative"] = verify_json(R, b, verify_ms, ms, v0);
        stop_decoding(*R.verify, vs);
    }
    return row;
}
}   // namespace

int cmd_bench_model(int argc, char** argv) {
    ArgParser args("bench model", argc, argv);
    const std::string model_dir = args.required("--model");
    const std::vector<int32_t> prompt_lens = parse_int_list("--prompt-lens", args.str("--prompt-lens", "128,512"));
    const std::vector<int32_t> batches = parse_int_list("--batches", args.str("--batches", "1,4,16"));
    const std::vector<int32_t> contexts = parse_int_list("--contexts", args.str("--contexts", "0,1024,4096"));
    const int64_t steps = args.integer("--decode-steps", 8), reps = args.integer("--reps", 3);
    const std::string json_path = args.str("--json", ""), plot_path = args.str("--plot", "");
    const bool quiet = args.flag("--quiet");
    const bool compare_torch = args.flag("--compare-torch");
    TorchCompareOptions torch_opt;
    torch_opt.script = args.str("--torch-script", default_torch_script());
    torch_opt.python = args.str("--python", torch_opt.python);
    const bool explicit_budget = args.has("--max-num-batched-tokens");
    // --speculative-config's end-to-end point: bench decode's workload (a random prompt repeated)
    const int64_t repeat = args.integer("--repeat-prompt", 4, 1, 64);
    const int64_t spec_prompt = args.integer("--spec-prompt-len", 32, 1, 1 << 16);
    const int64_t spec_out = args.integer("--spec-output-len", 32, 2, 1 << 16);
    const std::vector<std::pair<int32_t, float>> spec_bias = parse_logit_bias(args);   // its output repeats
    const EngineOptions eo = parse_engine_options(args);
    const bool spec = eo.cfg.speculative.enabled();
    if (!spec_bias.empty() && !spec) throw Error("--logit-bias is for --speculative-config's end-to-end point");
    const int32_t k = spec ? eo.cfg.speculative.num_speculative_tokens : 0;
    EngineConfig cfg = eo.cfg;
    cfg.speculative = SpeculativeConfig{};   // the plain engine's; the speculating ones get it back
    args.done();
    if (compare_torch && eo.shard.split()) throw Error("bench model --compare-torch runs in one process");
    if (spec && eo.shard.split()) throw Error("bench model --speculative-config runs in one process");
    if (steps < 1 || reps < 1 || reps > 100) throw Error("--decode-steps >= 1 and --reps in [1, 100]");
    for (int32_t v : prompt_lens)
        if (v < 1) throw Error("--prompt-lens must be >= 1");
    for (int32_t v : batches)
        if (v < 1 || v > 1024) throw Error("--batches must be in [1, 1024]");
    for (int32_t v : contexts)
        if (v < 0) throw Error("--contexts must be >= 0");
    if (compare_torch) check_torch_baseline(torch_opt);

    auto model = load_model_with_progress(model_dir, quiet, eo.weight_memory, eo.shard, eo.check_weights, true);
    eo.settle(cfg, *model);
    const int64_t vocab = model->config().vocab_size;
    const int32_t max_b = *std::max_element(batches.begin(), batches.end());
    const int32_t max_ctx = *std::max_element(contexts.begin(), contexts.end());
    const int32_t max_p = *std::max_element(prompt_lens.begin(), prompt_lens.end());
    cfg.max_num_seqs = std::max(cfg.max_num_seqs, max_b);
    if (!explicit_budget) cfg.max_num_batched_tokens = std::max(cfg.max_num_batched_tokens, max_p);
    // room for the measured steps (k + 1 tokens each where a verification accepts every draft)
    const int64_t growth = int64_t(k + 1) * (1 + steps * reps + skew_steps(max_b, max_ctx, cfg.max_num_batched_tokens));
    cfg.max_model_len = std::max<int32_t>(cfg.max_model_len, int32_t(max_ctx + growth + 2));
    cfg.max_model_len = std::max(cfg.max_model_len, max_ctx + max_p + 2);
    if (spec) cfg.max_model_len = std::max<int32_t>(cfg.max_model_len, int32_t(spec_prompt * repeat + spec_out + 2));
    const auto draft = load_draft_model(eo, *model, model_dir, quiet);
    EngineConfig spec_cfg = cfg;
    spec_cfg.speculative = eo.cfg.speculative;
    spec_cfg.draft_model = draft.get();
    EngineConfig verify_cfg = spec_cfg;
    verify_cfg.speculative_full_drafts = true;
    const int32_t spec_seqs = Speculator::n_seqs(spec_cfg);
    const int32_t verify_tokens = max_b + std::min(max_b, spec_seqs) * k;   // the largest verification step
    if (spec && !explicit_budget)
        verify_cfg.max_num_batched_tokens = std::max(verify_cfg.max_num_batched_tokens, verify_tokens);
    if (spec && verify_cfg.max_num_batched_tokens < verify_tokens)
        throw Error(
            "bench model --speculative-config: --max-num-batched-tokens must hold a verification step of the "
            "largest batch (" +
            std::to_string(verify_tokens) + " tokens)");
    Engine engine(*model, cfg);
    std::unique_ptr<Engine> verify = spec ? std::make_unique<Engine>(*model, verify_cfg) : nullptr;
    if (!engine.leads()) {   // another rank of a split model (mpirun): rank 0's steps
        engine.follow();
        return 0;
    }
    if (!quiet) std::fprintf(stderr, "bench model: %s\n", engine.sizing().describe().c_str());
    dist::Comm& comm = dist::Comm::world();

    // The limits, measured on the same threads: the peak once (a register loop, steady), the
    // read bandwidth in passes interleaved with the rows (a shared VM drifts within a run);
    // every roofline uses the median pass, and the spread is reported with it.
    ThreadPool pool{cfg.threads};
    const ProbeBuffer probe(pool, int64_t(512) << 17);   // 512 MiB
    BandwidthSamples bws;
    sample_bandwidth(probe, pool, 3, bws);
    double peak = 0;
    std::string isa;
    for (int r = 0; r < 2; ++r) peak = std::max(peak, unit_peak_gflops(cfg.precision == Precision::kBF16, &pool, isa));

    Rng rng(12345);
    Progress bar("bench model", quiet);
    std::vector<int32_t> long_contexts;   // prefill rows after a cached context
    for (int32_t d : contexts)
        if (d > 0) long_contexts.push_back(d);
    const int32_t min_b = *std::min_element(batches.begin(), batches.end());
    const double total =
        double(prompt_lens.size() * (1 + long_contexts.size()) + batches.size() * contexts.size()) * double(reps) +
        (spec ? 2.0 * double(reps + 1) : 0.0);
    double done = 0;
    // prefill: from an empty context; prefill_ctx: after a cached one (its own key, so the
    // context-0 rows keep their meaning for readers of the JSON)
    J prefill = J::array(), prefill_ctx = J::array(), decode = J::array();
    const StepTraffic tr1 = decode_step_traffic(*model, 1, 0);
    // The cached context of each prefill row, reused by the first sequence of the decode rows at
    // the same context: at 64k tokens a prefill takes minutes here, and the prefix cache then
    // gives that sequence its context for the price of its last block.
    std::map<int32_t, std::vector<int32_t>> contexts_of;
    // One prefill row: `p` new tokens after `d` cached ones (the prefix cache holds them: a
    // shared d-token prefix is prefilled once, untimed; every rep then sends it with p fresh
    // tokens, and only those are computed — checked against the engine's hit count).
    auto prefill_row = [&](int32_t p, int32_t d) {
        if (!contexts_of.count(d)) contexts_of[d] = random_ids(rng, d, vocab);
        const std::vector<int32_t>& prefix = contexts_of[d];
        SamplingParams sp;
        sp.temperature = 0;
        sp.max_tokens = 1;
        auto prompt_of = [&](int64_t n_new) {
            std::vector<int32_t> ids = prefix;
            for (int32_t t : random_ids(rng, n_new, vocab)) ids.push_back(t);
            return ids;
        };
        if (d > 0) {   // fill the prefix cache
            std::vector<std::shared_ptr<RequestStream>> ss = {engine.submit(prompt_of(1), sp)};
            std::vector<int64_t> got = {0};
            run_until_tokens(engine, ss, got, 1);
            engine.run_until_idle();
        }
        std::vector<double> tps;
        double faults = 0, sys_s = 0, wall_s = 0, computed = 0;
        for (int64_t r = 0; r < reps; ++r) {
            const int64_t hits0 = engine.prefix_hit_tokens();
            std::vector<std::shared_ptr<RequestStream>> ss = {engine.submit(prompt_of(p), sp)};
            std::vector<int64_t> got = {0};
            const Usage u0 = usage_now();
            const double t0 = now_s();
            run_until_tokens(engine, ss, got, 1);
            const double dt = now_s() - t0;
            const Usage u1 = usage_now();
            const int64_t hit = engine.prefix_hit_tokens() - hits0;
            const double n_new = double(int64_t(d) + p - hit);   // tokens this rep computed
            computed += n_new;
            tps.push_back(n_new / dt);
            faults += u1.faults - u0.faults;
            sys_s += u1.sys_s - u0.sys_s;
            wall_s += dt;
            engine.run_until_idle();
            bar.update(++done, total, "runs");
        }
        const double n_new = computed / double(reps), ctx = double(d + p) - n_new;
        const J s = mmm(tps);
        // The matrix products of the computed tokens (lm_head for the last one only) and,
        // where a context precedes them, the attention over it.
        const double macs = (tr1.macs_per_token - tr1.head_macs) * n_new + tr1.head_macs;
        const double attn = attention_macs(*model, int64_t(n_new), int64_t(ctx));
        const double sec = n_new / s["median"].get<double>();
        const double gflops = 2.0 * macs / 1e9 / sec, attn_gflops = 2.0 * attn / 1e9 / sec;
        const std::string name = "pp" + std::to_string(p) + (d > 0 ? " @ d" + std::to_string(d) : "");
        (d > 0 ? prefill_ctx : prefill)
            .push_back({{"test", name},
                        {"prompt_tokens", p},
                        {"context", d},
                        {"computed_tokens", n_new},
                        {"cached_tokens", ctx},
                        {"tokens_per_s", s},
                        {"step_ms", 1e3 * sec},
                        {"gflops", gflops},
                        {"attention_gflops", attn_gflops},
                        {"pct_of_peak", 100.0 * (gflops + attn_gflops) / peak},
                        {"page_faults_per_prefill", faults / double(reps)},
                        {"sys_pct", 100.0 * sys_s / (wall_s * double(cfg.threads))}});
    };
    for (int32_t p : prompt_lens) prefill_row(p, 0);
    for (int32_t d : long_contexts)
        for (int32_t p : prompt_lens) prefill_row(p, d);
    DecodeRows rows{engine, verify.get(), *model, cfg, steps, reps, k, spec_seqs, probe, pool, bws, bar, done, total};
    for (int32_t d : contexts) {
        for (int32_t b : batches) {
            std::vector<std::vector<int32_t>> prompts;
            for (int32_t i = 0; i < b; ++i) {
                const bool cached = i == 0 && d > 0 && contexts_of.count(d);
                prompts.push_back(cached ? contexts_of[d] : random_ids(rng, std::max(d, 1), vocab));
            }
            decode.push_back(decode_row(rows, b, d, std::move(prompts)));
        }
    }
    J e2e = nullptr;   // --speculative-config: plain against speculative decoding, end to end
    if (spec) {
        verify.reset();   // its cache goes before the speculating engine's comes
        Engine spec_engine(*model, spec_cfg);
        e2e = spec_end_to_end(
            engine, spec_engine, cohort_prompts(rng, vocab, min_b, 0, spec_prompt, repeat), int32_t(spec_out), 1, reps,
            [&] { bar.update(++done, total, "runs"); }, spec_bias);
        e2e["repeat_prompt"] = repeat;
        for (const auto& [id, b] : spec_bias) e2e["logit_bias"][std::to_string(id)] = b;
    }
    sample_bandwidth(probe, pool, 2, bws);
    bar.finish();
    const double bw = bws.median();
    // The table, once every row and probe is in: the rooflines use the run's median bandwidth
    // (and, in brackets, the row's own probe, read just before it).
    std::printf(
        "| test | tokens/s (median [min, max]) | step ms | bytes/step | roofline ms | %% of limit | faults/step | sys "
        "%% |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    J all_prefill = prefill;
    for (const J& row : prefill_ctx) all_prefill.push_back(row);
    for (const J& row : all_prefill) {
        const J& s = row["tokens_per_s"];
        const bool attn = row["context"].get<int>() > 0;
        std::printf("| %s | %.1f [%.1f, %.1f] | %.1f | | | %.1f%% of peak%s | %.0f / prefill | %.1f |\n",
                    row["test"].get<std::string>().c_str(), s["median"].get<double>(), s["min"].get<double>(),
                    s["max"].get<double>(), row["step_ms"].get<double>(), row["pct_of_peak"].get<double>(),
                    attn ? " (attention included)" : "", row["page_faults_per_prefill"].get<double>(),
                    row["sys_pct"].get<double>());
    }
    for (J& row : decode) {
        const double bytes = row["bytes_per_step"].get<double>(), ms = row["step_ms"]["median"].get<double>();
        const double roof_ms = 1e3 * bytes / (bw * 1e9),
                     row_roof_ms = 1e3 * bytes / (row["probe_gbs"].get<double>() * 1e9);
        row["roofline_step_ms"] = roof_ms;
        row["pct_of_roofline"] = 100.0 * roof_ms / ms;
        row["pct_of_roofline_row_probe"] = 100.0 * row_roof_ms / ms;
        const J& s = row["tokens_per_s"];
        std::printf("| %s | %.1f [%.1f, %.1f] | %.2f | %.1f MiB | %.2f | %.1f%% of roofline [%.1f%%] | %.1f | %.1f |\n",
                    row["test"].get<std::string>().c_str(), s["median"].get<double>(), s["min"].get<double>(),
                    s["max"].get<double>(), ms, bytes / 1048576.0, roof_ms, row["pct_of_roofline"].get<double>(),
                    row["pct_of_roofline_row_probe"].get<double>(), row["page_faults_per_step"].get<double>(),
                    row["sys_pct"].get<double>());
        if (comm.distributed())   // bytes/step and the roofline above are this rank's (its slices)
            std::printf(
                "|   %s on %d ranks: compute %.2f ms/step, communication %.2f ms/step (%.0f%%), %.1f KiB sent/step "
                "by rank 0 |\n",
                row["test"].get<std::string>().c_str(), comm.size(), row["compute_ms_per_step"].get<double>(),
                row["comm_ms_per_step"].get<double>(), 100.0 * row["comm_share"].get<double>(),
                row["comm_bytes_per_step"].get<double>() / 1024.0);
    }
    std::printf(
        "\nlimits measured in this run: read bandwidth %.1f GB/s (median of %zu passes interleaved with the rows; "
        "min %.1f, max %.1f), %s peak %.1f GFLOP/s (%d threads); weights: %s\n",
        bw, bws.gbs.size(), bws.min(), bws.max(), isa.c_str(), peak, cfg.threads,
        file_memory_name(model->store().file_memory()));
    if (spec) print_speculation(decode, e2e, spec_cfg.speculative.describe());
    J torch_info = nullptr;
    if (compare_torch) {
        torch_opt.model_dir = model_dir;
        torch_opt.prompt_lens = prompt_lens;
        torch_opt.batches = batches;
        torch_opt.contexts = contexts;
        torch_opt.reps = reps;
        torch_opt.decode_steps = steps;
        torch_opt.threads = cfg.threads;
        torch_opt.quiet = quiet;
        const J t = run_torch_baseline(torch_opt);
        std::printf("\nagainst the PyTorch eager bf16 baseline (torch %s, same threads; tokens/s medians):\n",
                    t.value("torch_version", "?").c_str());
        std::printf("| test | kimi.cpp | torch | speedup |\n| --- | --- | --- | --- |\n");
        join_torch_rows(prefill, t["prefill"]);
        join_torch_rows(decode, t["decode"]);
        torch_info = {{"benchmark", t.value("benchmark", "")},
                      {"torch_version", t.value("torch_version", "")},
                      {"script", torch_opt.script},
                      {"prefill", t["prefill"]},
                      {"decode", t["decode"]}};
    }
    J out = {{"benchmark", "model"},
             {"model", model_dir},
             {"threads", cfg.threads},
             {"ranks", comm.size()},
             {"expert_parallel", eo.shard.expert_parallel},
             {"activation_dtype", cfg.precision == Precision::kBF16 ? "bf16" : "f32"},
             {"weight_memory", file_memory_name(model->store().file_memory())},
             {"cpu_flags", cpu::cpu_features_string()},
             {"matmul_units", cpu::matmul_units()},
             {"read_bandwidth_gbs", bw},
             {"read_bandwidth_samples_gbs", bws.gbs},
             {"read_bandwidth_spread_gbs", {{"min", bws.min()}, {"median", bw}, {"max", bws.max()}}},
             {"peak_gflops", peak},
             {"peak_isa", isa},
             {"reps", reps},
             {"decode_steps", steps},
             {"prefill", prefill},
             {"prefill_after_context", prefill_ctx},
             {"decode", decode}};
    if (compare_torch) out["torch"] = torch_info;
    if (spec) {
        out["speculative_config"] = spec_cfg.speculative.describe();
        out["speculative_end_to_end"] = e2e;
    }
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        if (!f) throw Error(json_path + ": cannot create");
        f << out.dump(2) << "\n";
    }
    if (!plot_path.empty()) {
        std::vector<bench::PlotSeries> series;
        for (int32_t d : contexts) {
            bench::PlotSeries s;
            s.name = "d" + std::to_string(d);
            for (const auto& row : decode)
                if (row["context"] == d)
                    s.points.push_back({double(row["batch"].get<int>()), row["tokens_per_s"]["median"].get<double>()});
            series.push_back(std::move(s));
        }
        for (int32_t d : contexts) {
            if (!compare_torch) break;
            bench::PlotSeries s;
            s.name = "torch d" + std::to_string(d);
            for (const auto& row : decode)
                if (row["context"] == d && row.contains("torch_tokens_per_s"))
                    s.points.push_back(
                        {double(row["batch"].get<int>()), row["torch_tokens_per_s"]["median"].get<double>()});
            series.push_back(std::move(s));
        }
        std::vector<bench::LineChart> charts = {{"decode tokens/s by batch", "batch", "tokens/s", std::move(series)}};
        if (spec) charts.push_back(speculation_chart(decode));
        bench::write_line_plots(plot_path, charts);
    }
    return 0;
}

}   // namespace kimi::app
