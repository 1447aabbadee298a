// `kimi-cpp eval gsm8k`: GSM8K few-shot (vLLM tests/evals/gsm8k prompt and request: the
// first --num-shots train examples, "Question: …\nAnswer:", max_tokens 256, stop
// ["Question", "Assistant:", "<|separator|>"], temperature 0, seed 42) against a server
// (--base-url, /v1/completions) or in-process (--model). Scored by vLLM's extractor (the
// primary `correct`) and by lm-eval's flexible-extract and strict-match. Writes one JSONL
// line per sample and prints a summary; --ab runs both attention-output modes in one process
// and compares them with the exact McNemar test.
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "args.h"
#include "bench/gsm8k.h"
#include "bench/sse_client.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "progress.h"

namespace kimi::app {

int cmd_eval_compare(int argc, char** argv);   // cmd_eval.cpp

namespace {
using J = nlohmann::ordered_json;

const std::vector<std::string> kStops = {"Question", "Assistant:", "<|separator|>"};

struct Reply {
    std::string text, finish;
    int64_t completion_tokens = 0;
    std::string error;   // empty = the request succeeded
};

struct Settings {
    std::vector<bench::Gsm8kItem> shots, tests;
    int32_t max_tokens = 256;
    int64_t seed = 42;
    size_t concurrency = 8;
    bool quiet = false;
};

// Runs fn(i) for every test item on `concurrency` threads, with a progress bar.
void for_all(const Settings& s, const std::string& label, const std::function<void(size_t)>& fn) {
    for_each_parallel(s.tests.size(), s.concurrency, label, s.quiet, "questions", fn);
}

std::vector<Reply> run_server(const Settings& s, const bench::Endpoint& ep, const std::string& model) {
    std::vector<Reply> out(s.tests.size());
    for_all(s, "gsm8k", [&](size_t i) {
        J body = {{"prompt", bench::gsm8k_prompt(s.shots, s.tests[i].question)},
                  {"max_tokens", s.max_tokens},
                  {"stop", kStops},
                  {"temperature", 0.0},
                  {"seed", s.seed}};
        if (!model.empty()) body["model"] = model;
        auto [status, j] = bench::post_json(ep, "/v1/completions", body);
        Reply& r = out[i];
        if (status != 200 || !j.contains("choices") || j["choices"].empty()) {
            r.error = "HTTP " + std::to_string(status) + ": " + j.dump().substr(0, 300);
            return;
        }
        r.text = j["choices"][0].value("text", "");
        r.finish = j["choices"][0].value("finish_reason", "");
        if (j.contains("usage")) r.completion_tokens = j["usage"].value("completion_tokens", int64_t(0));
    });
    return out;
}

std::vector<Reply> run_engine(const Settings& s, Engine& engine, const tok::Tokenizer& tok, const std::string& label) {
    std::vector<Reply> out(s.tests.size());
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = s.max_tokens;
    p.seed = uint64_t(s.seed);
    p.stop = kStops;
    for (int32_t id : tok.stop_ids()) p.stop_token_ids.push_back(id);
    for_all(s, label, [&](size_t i) {
        Reply& r = out[i];
        try {
            auto st = engine.submit(tok.encode(bench::gsm8k_prompt(s.shots, s.tests[i].question), true), p);
            TokenEvent e;
            while (st->next(e)) {
                r.text += e.text;
                r.completion_tokens += e.token >= 0;
                if (e.finish != FinishReason::kNone) r.finish = finish_reason_name(e.finish);
            }
        } catch (const Error& e) {
            r.error = e.what();
        }
    });
    return out;
}

// Scores, writes the JSONL, returns the summary.
J score_and_write(const Settings& s, const std::vector<Reply>& replies, const std::string& path, double seconds) {
    std::ofstream f(path);
    if (!f) throw Error(path + ": cannot create");
    int64_t failed = 0, garbled = 0, tokens = 0;
    std::map<std::string, std::pair<int64_t, int64_t>> tally;   // scorer → (correct, invalid)
    for (size_t i = 0; i < replies.size(); ++i) {
        const Reply& r = replies[i];
        const std::string& gold = s.tests[i].answer;
        const std::pair<const char*, bench::Score> scores[] = {
            {"vllm", bench::score_vllm(r.text, gold)},
            {"flexible-extract", bench::score_flexible(r.text, gold)},
            {"strict-match", bench::score_strict(r.text, gold)}};
        J by = J::object(), ext = J::object();
        for (const auto& [name, sc] : scores) {
            const bool ok = r.error.empty() && sc.correct;
            by[name] = ok;
            ext[name] = sc.extracted;
            tally[name].first += ok;
            tally[name].second += sc.invalid || !r.error.empty();
        }
        failed += !r.error.empty();
        garbled += r.error.empty() && bench::is_garbled(r.text);
        tokens += r.completion_tokens;
        J line = {{"id", int64_t(i)},
                  {"prompt", bench::gsm8k_prompt(s.shots, s.tests[i].question)},
                  {"response", r.text},
                  {"gold", gold},
                  {"gold_value", bench::vllm_answer_value(gold)},
                  {"correct", by["vllm"]},
                  {"correct_by_scorer", by},
                  {"extracted", ext},
                  {"finish_reason", r.finish},
                  {"completion_tokens", r.completion_tokens}};
        if (!r.error.empty()) line["error"] = r.error;
        f << line.dump(-1, ' ', false, J::error_handler_t::replace) << "\n";
    }
    const double n = double(replies.size());
    J sum = {{"samples", path},         {"n", replies.size()},       {"accuracy", double(tally["vllm"].first) / n},
             {"scorers", J::object()},  {"requests_failed", failed}, {"garbled_responses", garbled},
             {"output_tokens", tokens}, {"duration_s", seconds},     {"questions_per_s", n / seconds}};
    for (const auto& [name, t] : tally)
        sum["scorers"][name] = {{"accuracy", double(t.first) / n}, {"invalid_rate", double(t.second) / n}};
    return sum;
}

void print_summary(const J& s) {
    std::printf("gsm8k: %lld questions, accuracy %.4f (vllm scorer) — %s\n", (long long)s["n"].get<int64_t>(),
                s["accuracy"].get<double>(), s["samples"].get<std::string>().c_str());
    for (const auto& [name, v] : s["scorers"].items())
        std::printf("  %-17s accuracy %.4f  invalid rate %.4f\n", name.c_str(), v["accuracy"].get<double>(),
                    v["invalid_rate"].get<double>());
    std::printf("  requests failed %lld, garbled responses %lld, %lld output tokens in %.1f s\n",
                (long long)s["requests_failed"].get<int64_t>(), (long long)s["garbled_responses"].get<int64_t>(),
                (long long)s["output_tokens"].get<int64_t>(), s["duration_s"].get<double>());
}
}   // namespace

int cmd_eval_gsm8k(int argc, char** argv) {
    ArgParser args("eval gsm8k", argc, argv);
    const auto base_url = args.opt("--base-url");
    const auto model_dir = args.opt("--model");
    const std::string served = args.str("--served-model", "");
    const std::string data_dir = args.str("--data-dir", KIMI_SOURCE_DIR "/data/gsm8k");
    const int64_t shots = args.integer("--num-shots", 5), limit = args.integer("--limit", 0);
    Settings s;
    s.max_tokens = int32_t(args.integer("--max-tokens", 256));
    s.seed = args.integer("--seed", 42);
    const int64_t conc = args.integer("--max-concurrency", 8);
    s.quiet = args.flag("--quiet");
    const bool ab = args.flag("--ab");
    const std::string out = args.str("--out", "gsm8k_samples.jsonl");
    const std::string summary_path = args.str("--json", "");
    const std::string api_key = args.str("--api-key", "");
    const std::string tok_dir = args.str("--tokenizer", model_dir.value_or(""));
    const EngineOptions eo = parse_engine_options(args);
    EngineConfig cfg = eo.cfg;
    args.done();
    if (base_url) require_one_process(eo, "eval gsm8k --base-url");
    if (bool(base_url) == bool(model_dir)) throw Error("give exactly one of --base-url URL or --model DIR");
    if (ab && !model_dir) throw Error("--ab runs in-process: it needs --model DIR");
    if (shots < 0 || shots > 20 || limit < 0 || conc < 1 || s.max_tokens < 1)
        throw Error("--num-shots in [0, 20], --limit >= 0, --max-concurrency >= 1, --max-tokens >= 1");
    s.concurrency = size_t(conc);
    const auto train = bench::read_gsm8k(data_dir + "/train_fewshot.jsonl");
    if (int64_t(train.size()) < shots)
        throw Error(data_dir + "/train_fewshot.jsonl has fewer than --num-shots examples");
    s.shots.assign(train.begin(), train.begin() + shots);
    s.tests = bench::read_gsm8k(data_dir + "/test.jsonl");
    if (limit > 0 && size_t(limit) < s.tests.size()) s.tests.resize(size_t(limit));

    auto timed = [](auto&& fn) {
        const auto t0 = std::chrono::steady_clock::now();
        auto r = fn();
        return std::make_pair(std::move(r),
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    std::vector<J> summaries;
    if (base_url) {
        bench::Endpoint ep = bench::parse_base_url(*base_url);
        ep.api_key = api_key;
        auto [replies, secs] = timed([&] { return run_server(s, ep, served); });
        summaries.push_back(score_and_write(s, replies, out, secs));
    } else {
        if (cfg.max_num_seqs < int32_t(conc)) cfg.max_num_seqs = int32_t(conc);
        auto model = load_model_with_progress(*model_dir, s.quiet, eo.weight_memory, eo.shard, eo.check_weights);
        eo.settle(cfg, *model);
        const auto draft = load_draft_model(eo, *model, *model_dir, s.quiet);
        cfg.draft_model = draft.get();
        if (eo.shard.split() && eo.shard.rank != 0) {   // another rank (mpirun): each engine of rank 0, in turn
            for (int k = 0; k < (ab ? 2 : 1); ++k) {
                EngineConfig c = cfg;
                c.attn_output = !ab ? cfg.attn_output : k == 0 ? AttnOutputMode::kDirect : AttnOutputMode::kCopy;
                Engine(*model, c).follow();
            }
            return 0;
        }
        const tok::Tokenizer tok = *load_tokenizer_for(tok_dir, model->config(), true);
        const std::vector<AttnOutputMode> modes = ab
            ? std::vector<AttnOutputMode>{AttnOutputMode::kDirect, AttnOutputMode::kCopy}
            : std::vector<AttnOutputMode>{cfg.attn_output};
        for (AttnOutputMode m : modes) {
            EngineConfig c = cfg;
            c.attn_output = m;
            Engine engine(*model, c, &tok);
            engine.start();
            const std::string name = m == AttnOutputMode::kDirect ? "direct" : "copy";
            std::string path = out;
            if (ab) {
                const size_t dot = out.rfind(".jsonl");
                path = (dot == std::string::npos ? out : out.substr(0, dot)) + "." + name + ".jsonl";
            }
            auto [replies, secs] = timed([&] { return run_engine(s, engine, tok, "gsm8k " + name); });
            engine.stop();
            J sum = score_and_write(s, replies, path, secs);
            sum["attn_output"] = name;
            summaries.push_back(std::move(sum));
        }
    }
    for (const auto& sm : summaries) print_summary(sm);
    if (!summary_path.empty()) {
        std::ofstream f(summary_path);
        if (!f) throw Error(summary_path + ": cannot create");
        f << (summaries.size() == 1 ? summaries[0] : J(summaries)).dump(2) << "\n";
    }
    if (ab) {
        std::printf("\ndirect (A) vs copy (B):\n");
        std::string a = summaries[0]["samples"].get<std::string>(), b = summaries[1]["samples"].get<std::string>();
        char* av[] = {a.data(), b.data()};
        return cmd_eval_compare(2, av);
    }
    return 0;
}

}   // namespace kimi::app
