// `kimi-cpp bench decode`: the fixed-cohort decode A/B. A cohort of --concurrency requests
// (a shared --prefix-len prefix + a distinct --suffix-len suffix each, seeded random ids;
// greedy, EOS ignored, --output-len tokens) runs --warmup + --runs times in-process. With
// --ab both attention-output modes run on the same loaded weights, interleaved run by run
// (direct/copy, then copy/direct, ...) so machine drift hits both. Per variant: mean TPOT,
// median and p99 ITL, output tokens/s — each the mean over runs ± std across runs — plus the
// engine counters per steady-state decode step, mean TTFT and prompt tokens served from the
// prefix cache (--prefix-caching on|off; on by default, as the seed ran). With
// --speculative-config the A/B is plain decoding against speculative decoding instead (same
// weights, interleaved), and the speculative variant adds its acceptance rate and mean accepted
// length (vLLM's: 1 + accepted / drafts); --repeat-prompt N makes each prompt its random part
// repeated N times, the workload where prompt lookup pays (a model continues the repetition);
// --logit-bias ID=BIAS (repeatable) favours tokens, so a random model's output repeats too.
// Prints a markdown table, writes --json and --plot (PNG).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "args.h"
#include "backend/cpu/cpu_features.h"
#include "bench/plot.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "core/rng.h"
#include "decode_cohort.h"
#include "engine_options.h"
#include "progress.h"

namespace kimi::app {

namespace {
// --logit-bias as {"ID": BIAS} (the OpenAI field's shape).
nlohmann::ordered_json bias_json(std::span<const std::pair<int32_t, float>> bias) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [id, b] : bias) j[std::to_string(id)] = b;
    return j;
}

using J = nlohmann::ordered_json;

struct Variant {
    std::string name;
    std::unique_ptr<Engine> engine;
    std::vector<RunResult> runs;   // measured only
};

std::string git_commit() {
    std::string out;
    if (FILE* p = popen("git -C '" KIMI_SOURCE_DIR "' rev-parse HEAD 2>/dev/null", "r")) {
        char buf[128];
        while (std::fgets(buf, sizeof buf, p)) out += buf;
        pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out.empty() ? "unknown" : out;
}

}   // namespace

int cmd_bench_decode(int argc, char** argv) {
    ArgParser args("bench decode", argc, argv);
    const std::string model_dir = args.required("--model");
    const int64_t conc = args.integer("--concurrency", 4, 1, 1024), prefix = args.integer("--prefix-len", 256),
                  suffix = args.integer("--suffix-len", 32), out_len = args.integer("--output-len", 64),
                  warmup = args.integer("--warmup", 1), runs = args.integer("--runs", 3),
                  seed = args.integer("--seed", 0);
    const bool ab = args.flag("--ab");
    const bool quiet = args.flag("--quiet");
    const std::string json_path = args.str("--json", ""), plot_path = args.str("--plot", "");
    const bool explicit_seqs = args.has("--max-num-seqs");
    const bool explicit_budget = args.has("--max-num-batched-tokens");
    const auto prefix_caching = args.opt("--prefix-caching");   // on|off: the seed's cohort ran with it on
    const int64_t repeat = args.integer("--repeat-prompt", 1, 1, 64);
    const std::vector<std::pair<int32_t, float>> bias = parse_logit_bias(args);
    const EngineOptions eo = parse_engine_options(args);
    const bool spec = eo.cfg.speculative.enabled();
    if (spec && ab) throw Error("give --ab (direct vs copy) or --speculative-config (plain vs speculative), not both");
    EngineConfig cfg = eo.cfg;
    args.done();
    if (prefix_caching) {
        if (*prefix_caching != "on" && *prefix_caching != "off") throw Error("--prefix-caching must be on or off");
        cfg.enable_prefix_caching = *prefix_caching == "on";
    }
    if (prefix < 0 || suffix < 0 || prefix + suffix < 1) throw Error("--prefix-len + --suffix-len must be at least 1");
    if (out_len < 2 || out_len > 1 << 20) throw Error("--output-len must be at least 2");
    if (warmup < 0 || runs < 1 || runs > 1000) throw Error("--runs must be in [1, 1000] and --warmup >= 0");
    if (!explicit_seqs) cfg.max_num_seqs = int32_t(conc);
    // The whole cohort prefills in one step unless told otherwise, so every measured gap is a
    // decode step — up to kMaxCohortStep tokens: a step's activations (and the engine's profile
    // run, which sizes them at start) grow with its tokens. 16 prompts of an 8k prefix in one
    // step took 24 GB; 8,192-token steps 6 GB per engine on the bench preset. Past the cap the
    // cohort prefills in chunks (the prefix cache then serves the shared prefix from the second
    // run on, so the measured runs prefill only the suffixes).
    constexpr int64_t kMaxCohortStep = 2048;
    if (!explicit_budget)
        cfg.max_num_batched_tokens =
            int32_t(std::max<int64_t>(cfg.max_num_batched_tokens, std::min(kMaxCohortStep, conc * (prefix + suffix))));
    const int64_t need = (prefix + suffix) * repeat + out_len;
    if (cfg.max_model_len == 0) cfg.max_model_len = int32_t(std::max<int64_t>(need, 256));
    if (explicit_seqs && cfg.max_num_seqs < conc)
        throw Error("--max-num-seqs must be >= --concurrency (a fixed cohort)");

    auto model = load_model_with_progress(model_dir, quiet, eo.weight_memory, eo.shard, eo.check_weights, true);
    eo.settle(cfg, *model);
    const auto draft = load_draft_model(eo, *model, model_dir, quiet);
    cfg.draft_model = draft.get();
    const int64_t vocab = model->config().vocab_size;
    Rng rng(uint64_t(seed) * 0x9e3779b97f4a7c15ull + 1);
    const std::vector<std::vector<int32_t>> prompts = cohort_prompts(rng, vocab, conc, prefix, suffix, repeat);

    std::vector<Variant> variants;
    const std::vector<AttnOutputMode> modes = ab
        ? std::vector<AttnOutputMode>{AttnOutputMode::kDirect, AttnOutputMode::kCopy}
        : std::vector<AttnOutputMode>{cfg.attn_output};
    if (spec) {
        EngineConfig plain = cfg;
        plain.speculative = SpeculativeConfig{};
        variants.push_back({"plain", std::make_unique<Engine>(*model, plain), {}});
        variants.push_back({"speculative", std::make_unique<Engine>(*model, cfg), {}});
    } else {
        for (AttnOutputMode m : modes) {
            EngineConfig c = cfg;
            c.attn_output = m;
            variants.push_back(
                {m == AttnOutputMode::kDirect ? "direct" : "copy", std::make_unique<Engine>(*model, c), {}});
        }
    }
    if (!variants[0].engine->leads()) {   // another rank of a split model (mpirun): rank 0's steps, both engines
        variants[0].engine->follow();
        return 0;
    }
    if (!quiet) std::fprintf(stderr, "bench decode: %s\n", variants[0].engine->sizing().describe().c_str());

    Progress bar("bench decode", quiet);
    const int64_t total = (warmup + runs) * int64_t(variants.size());
    int64_t done = 0;
    for (int64_t run = 0; run < warmup + runs; ++run) {
        for (size_t k = 0; k < variants.size(); ++k) {
            Variant& v = variants[(size_t(run) + k) % variants.size()];   // alternate who goes first
            RunResult r = run_cohort(*v.engine, prompts, int32_t(out_len), bias);
            if (run >= warmup) v.runs.push_back(std::move(r));
            bar.update(double(++done), double(total), "runs");
        }
    }
    bar.finish();

    J out;
    out["benchmark"] = "decode";
    out["config"] = {{"model", model_dir},
                     {"concurrency", conc},
                     {"prefix_len", prefix},
                     {"suffix_len", suffix},
                     {"output_len", out_len},
                     {"warmup", warmup},
                     {"runs", runs},
                     {"seed", seed},
                     {"threads", cfg.threads},
                     {"activation_dtype", cfg.precision == Precision::kBF16 ? "bf16" : "f32"},
                     {"max_num_batched_tokens", cfg.max_num_batched_tokens},
                     {"prefix_caching", cfg.enable_prefix_caching},
                     {"repeat_prompt", repeat},
                     {"logit_bias", bias_json(bias)},
                     {"speculative_config", spec ? J(cfg.speculative.describe()) : J(nullptr)},
                     {"attention_layers", model->config().n_layers}};
    out["git_commit"] = git_commit();
    out["cpu_flags"] = cpu::cpu_features_string();
    out["variants"] = J::object();
    for (const auto& v : variants) {
        out["variants"][v.name] = runs_json(v.runs);
        if (v.name == "speculative") out["variants"][v.name]["spec_decode"] = spec_decode_json(v.runs);
    }

    // The table.
    std::printf(
        "| variant | mean TPOT (ms) | median ITL (ms) | p99 ITL (ms) | output tok/s | completed | copies/step | "
        "allocs/step | step (ms) |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const auto& v : variants) {
        const J& j = out["variants"][v.name];
        std::printf("| %s | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.1f ± %.1f | %lld | %.2f | %.2f | %.3f |\n",
                    v.name.c_str(), j["mean_tpot_ms"].get<double>(), j["std_tpot_ms"].get<double>(),
                    j["median_itl_ms"].get<double>(), j["std_median_itl_ms"].get<double>(),
                    j["p99_itl_ms"].get<double>(), j["std_p99_itl_ms"].get<double>(),
                    j["output_throughput"].get<double>(), j["std_output_throughput"].get<double>(),
                    (long long)j["completed"].get<int64_t>(), j["attn_output_copies_per_step"].get<double>(),
                    j["allocations_per_step"].get<double>(), j["step_ms"].get<double>());
    }
    if (ab || spec) {   // the second variant against the first's baseline
        const std::string base = ab ? "copy" : "plain", test = ab ? "direct" : "speculative";
        const J& d = out["variants"][test];
        const J& c = out["variants"][base];
        J delta = J::object();
        std::printf("\n| metric | %s | %s | delta | delta %% |\n| --- | --- | --- | --- | --- |\n", base.c_str(),
                    test.c_str());
        for (const char* k : {"mean_tpot_ms", "median_itl_ms", "p99_itl_ms", "output_throughput"}) {
            const double a = c[k].get<double>(), b = d[k].get<double>();
            const double pct = a != 0 ? 100.0 * (b - a) / a : 0.0;
            delta[k] = {{"abs", b - a}, {"pct", pct}};
            std::printf("| %s | %.3f | %.3f | %+.3f | %+.2f%% |\n", k, a, b, b - a, pct);
        }
        out[ab ? "delta_direct_vs_copy" : "delta_speculative_vs_plain"] = delta;
        if (spec) {
            const J& s = out["variants"]["speculative"]["spec_decode"];
            std::printf("\nspeculative: acceptance rate %.3f, mean acceptance length %.2f (%lld drafts)\n",
                        s["acceptance_rate"].get<double>(), s["mean_acceptance_length"].get<double>(),
                        (long long)s["num_drafts"].get<int64_t>());
        }
    }
    std::fflush(stdout);
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        if (!f) throw Error(json_path + ": cannot create");
        f << out.dump(2) << "\n";
    }
    if (!plot_path.empty()) {
        std::vector<bench::PlotSeries> tpot_runs, itl;
        for (const auto& v : variants) {
            bench::PlotSeries s;
            s.name = v.name;
            for (size_t i = 0; i < v.runs.size(); ++i) s.points.push_back({double(i + 1), v.runs[i].mean_tpot_ms});
            tpot_runs.push_back(std::move(s));
            bench::PlotSeries h;
            h.name = v.name;
            for (const auto& r : v.runs) h.values.insert(h.values.end(), r.itl_ms.begin(), r.itl_ms.end());
            itl.push_back(std::move(h));
        }
        bench::write_decode_ab_plot(plot_path, tpot_runs, itl);
    }
    return 0;
}

}   // namespace kimi::app
