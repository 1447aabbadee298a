// `kimi-cpp bench serve`: the serving benchmark, a load generator for any OpenAI-compatible
// server (ours or another engine's), with vLLM `bench serve`'s metric definitions and result
// field names. Datasets: random (input/output lengths with a range ratio), prefix (a shared
// prefix + a distinct suffix per request) — both seeded random token ids decoded with our
// tokenizer — and a JSONL file of {"prompt", "output_len"?}. Arrivals: all at once
// (--request-rate inf) or gamma-distributed (Poisson at --burstiness 1); --max-concurrency
// caps requests in flight. Tokens are counted with our tokenizer when the server sends no
// usage. --response-format-schema FILE sends every request with that JSON Schema as its
// response_format and reports how many replies parse as JSON and the server's mean grammar
// compile time (from /metrics, when the server is ours).
// ref: vllm/benchmarks/serve.py, datasets/random.py.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "args.h"
#include "bench/plot.h"
#include "bench/sse_client.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "core/rng.h"
#include "progress.h"
#include "tokenizer/tokenizer.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

struct Prompt {
    std::string text;
    int64_t input_len = 0;
    int64_t output_len = 0;
};

// Random ids of the base vocabulary, decoded and re-encoded until the length is exact
// (vLLM: random ids → decode → re-encode), trimmed or extended as needed.
std::string random_text(const tok::Tokenizer& tok, Rng& rng, int64_t len) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < len; ++i) ids.push_back(int32_t(rng.below(uint64_t(tok.n_base()))));
    std::string text = tok.decode_lossy(ids);
    for (int round = 0; round < 8; ++round) {
        std::vector<int32_t> re = tok.encode(text, false);
        if (int64_t(re.size()) == len) break;
        if (int64_t(re.size()) > len) re.resize(size_t(len));
        while (int64_t(re.size()) < len) re.push_back(int32_t(rng.below(uint64_t(tok.n_base()))));
        text = tok.decode_lossy(re);
    }
    return text;
}

int64_t uniform_len(Rng& rng, int64_t base, double ratio) {
    const int64_t lo = std::max<int64_t>(1, int64_t(std::floor(double(base) * (1 - ratio))));
    const int64_t hi = std::max<int64_t>(lo, int64_t(std::ceil(double(base) * (1 + ratio))));
    return lo + int64_t(rng.below(uint64_t(hi - lo + 1)));
}

std::string fmt_line(const char* label, double v) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%-40s %-10.2f\n", label, v);
    return buf;
}
}   // namespace

int cmd_bench_serve(int argc, char** argv) {
    ArgParser args("bench serve", argc, argv);
    const std::string base_url = args.str("--base-url", "http://127.0.0.1:8000");
    const std::string endpoint =
        args.choice("--endpoint", "/v1/completions", {"/v1/completions", "/v1/chat/completions"});
    std::string model = args.str("--model", "");
    const std::string tok_dir = args.required("--tokenizer");
    const std::string dataset = args.choice("--dataset", "random", {"random", "prefix", "jsonl"});
    const std::string dataset_path = args.str("--dataset-path", "");
    const int64_t in_len = args.integer("--random-input-len", 1024), out_len = args.integer("--random-output-len", 128);
    const double range = args.real("--random-range-ratio", 0.0);
    const int64_t prefix_len = args.integer("--prefix-len", 256), suffix_len = args.integer("--suffix-len", 256);
    const int64_t prefix_out = args.integer("--output-len", 128);
    const int64_t n_prompts = args.integer("--num-prompts", 100, 1, 1000000);
    const int64_t max_conc = args.integer("--max-concurrency", 0);
    const double rate = args.real("--request-rate", INFINITY), burstiness = args.real("--burstiness", 1.0);
    const bool ignore_eos = args.flag("--ignore-eos");
    const int64_t seed = args.integer("--seed", 0);
    const auto temperature = args.opt("--temperature");
    const std::string json_path = args.str("--json", ""), plot_path = args.str("--plot", "");
    const bool quiet = args.flag("--quiet");
    const std::string schema_path = args.str("--response-format-schema", "");
    bench::Endpoint ep = bench::parse_base_url(base_url);
    ep.api_key = args.str("--api-key", "");
    args.done();
    if (max_conc < 0) throw Error("--max-concurrency must be >= 0 (0: unlimited)");
    if (!(rate > 0)) throw Error("--request-rate must be > 0 (or inf)");
    if (!(burstiness > 0)) throw Error("--burstiness must be > 0");
    if (!(range >= 0 && range < 1)) throw Error("--random-range-ratio must be in [0, 1)");
    if (dataset == "jsonl" && dataset_path.empty()) throw Error("--dataset jsonl needs --dataset-path FILE");

    J schema;
    if (!schema_path.empty()) {
        std::ifstream f(schema_path);
        if (!f) throw Error(schema_path + ": cannot open");
        schema = J::parse(f, nullptr, false);
        if (schema.is_discarded()) throw Error("--response-format-schema: " + schema_path + " is not valid JSON");
    }
    const tok::Tokenizer tok = tok::Tokenizer::load(tok_dir);
    if (model.empty()) model = bench::get_json(ep, "/v1/models")["data"][0]["id"].get<std::string>();

    // The prompts.
    Rng rng(uint64_t(seed) + 0x51ed);
    std::vector<Prompt> prompts;
    if (dataset == "random") {
        for (int64_t i = 0; i < n_prompts; ++i) {
            Prompt p;
            p.input_len = uniform_len(rng, in_len, range);
            p.output_len = uniform_len(rng, out_len, range);
            p.text = random_text(tok, rng, p.input_len);
            prompts.push_back(std::move(p));
        }
    } else if (dataset == "prefix") {
        const std::string shared = random_text(tok, rng, prefix_len);
        for (int64_t i = 0; i < n_prompts; ++i) {
            Prompt p;
            p.text = shared + random_text(tok, rng, suffix_len);
            p.input_len = int64_t(tok.encode(p.text, false).size());
            p.output_len = prefix_out;
            prompts.push_back(std::move(p));
        }
    } else {
        std::ifstream f(dataset_path);
        if (!f) throw Error(dataset_path + ": cannot open");
        std::string line;
        for (int64_t n = 1; std::getline(f, line) && int64_t(prompts.size()) < n_prompts; ++n) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            J j;
            try {
                j = J::parse(line);
            } catch (const std::exception& e) {
                throw Error(dataset_path + ":" + std::to_string(n) + ": not JSON: " + e.what());
            }
            if (!j.contains("prompt") || !j["prompt"].is_string())
                throw Error(dataset_path + ":" + std::to_string(n) + ": needs a string \"prompt\"");
            Prompt p;
            p.text = j["prompt"].get<std::string>();
            p.input_len = int64_t(tok.encode(p.text, false).size());
            p.output_len = j.value("output_len", j.value("max_tokens", out_len));
            prompts.push_back(std::move(p));
        }
        if (prompts.empty()) throw Error(dataset_path + ": no prompts");
    }

    // Arrival times: gamma(shape = burstiness, scale = 1 / (rate · burstiness)); all 0 at inf.
    std::vector<double> arrival(prompts.size(), 0.0);
    if (std::isfinite(rate)) {
        std::mt19937_64 gen{uint64_t(seed)};
        std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
        double t = 0;
        for (auto& a : arrival) {
            a = t;
            t += gap(gen);
        }
    }

    const bool chat = endpoint == "/v1/chat/completions";
    auto body_for = [&](const Prompt& p) {
        J b = {{"model", model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
        if (chat) {
            b["messages"] = J::array({{{"role", "user"}, {"content", p.text}}});
            b["max_completion_tokens"] = p.output_len;
        } else {
            b["prompt"] = p.text;
            b["max_tokens"] = p.output_len;
            b["repetition_penalty"] = 1.0;
        }
        if (ignore_eos) b["ignore_eos"] = true;
        if (temperature) b["temperature"] = parse_real("--temperature", *temperature);
        if (!schema.is_null())
            b["response_format"] = {{"type", "json_schema"},
                                    {"json_schema", {{"name", "bench"}, {"schema", schema}, {"strict", true}}}};
        return b;
    };
    auto count = [&](const std::string& s) { return int64_t(tok.encode(s, false).size()); };

    // the server's grammar compile histogram (kimi-cpp serve) before the run
    const auto compile_stats = [&]() -> std::pair<double, double> {   // (sum s, count)
        try {
            const std::string m = bench::get_text(ep, "/metrics");
            const auto value = [&](const std::string& name) {
                const size_t at = m.find("\n" + name + " ");
                return at == std::string::npos ? 0.0 : std::atof(m.c_str() + at + name.size() + 2);
            };
            return {value("kimi:grammar_compile_seconds_sum"), value("kimi:grammar_compile_seconds_count")};
        } catch (const Error&) {
            return {0.0, 0.0};   // another engine: no such metric
        }
    };
    const std::pair<double, double> compile_before = schema.is_null() ? std::pair<double, double>{} : compile_stats();
    std::vector<bench::RequestResult> results(prompts.size());
    std::vector<std::string> texts(prompts.size());
    std::atomic<size_t> next{0};
    std::atomic<int64_t> finished{0};
    const size_t n_workers = size_t(std::min<int64_t>(max_conc > 0 ? max_conc : int64_t(prompts.size()), 1024));
    Progress bar("bench serve", quiet);
    std::mutex bar_mu;
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    std::vector<std::thread> workers;
    for (size_t w = 0; w < n_workers; ++w) {
        workers.emplace_back([&] {
            for (size_t i; (i = next.fetch_add(1)) < prompts.size();) {
                const double wait = arrival[i] - since();
                if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
                const double start = since();
                bench::RequestResult r =
                    bench::stream_request(ep, endpoint, body_for(prompts[i]), chat, count, texts[i]);
                r.start = start;
                if (r.prompt_tokens == 0) r.prompt_tokens = prompts[i].input_len;
                results[i] = std::move(r);
                const int64_t d = ++finished;
                std::lock_guard<std::mutex> lk(bar_mu);
                bar.update(double(d), double(prompts.size()), "requests");
            }
        });
    }
    for (auto& t : workers) t.join();
    const double duration = since();
    bar.finish();

    const bench::ServingMetrics m = bench::compute_serving_metrics(results, duration, {99.0});
    std::string table = "============ Serving Benchmark Result ============\n";
    table += fmt_line("Successful requests:", double(m.completed));
    table += fmt_line("Failed requests:", double(m.failed));
    table += fmt_line("Benchmark duration (s):", m.duration);
    table += fmt_line("Total input tokens:", double(m.total_input));
    table += fmt_line("Total generated tokens:", double(m.total_output));
    table += fmt_line("Request throughput (req/s):", m.request_throughput);
    table += fmt_line("Output token throughput (tok/s):", m.output_throughput);
    table += fmt_line("Peak output token throughput (tok/s):", m.max_output_tokens_per_s);
    table += fmt_line("Total token throughput (tok/s):", m.total_token_throughput);
    J out = {{"date", int64_t(std::time(nullptr))},
             {"backend", chat ? "openai-chat" : "openai"},
             {"base_url", base_url},
             {"endpoint", endpoint},
             {"model_id", model},
             {"dataset", dataset},
             {"num_prompts", n_prompts},
             {"request_rate", std::isfinite(rate) ? J(rate) : J("inf")},
             {"burstiness", burstiness},
             {"max_concurrency", max_conc > 0 ? J(max_conc) : J(nullptr)},
             {"seed", seed},
             {"duration", m.duration},
             {"completed", m.completed},
             {"failed", m.failed},
             {"total_input_tokens", m.total_input},
             {"total_output_tokens", m.total_output},
             {"request_throughput", m.request_throughput},
             {"output_throughput", m.output_throughput},
             {"max_output_tokens_per_s", m.max_output_tokens_per_s},
             {"total_token_throughput", m.total_token_throughput}};
    const std::pair<const char*, const bench::Summary*> metrics[] = {
        {"ttft", &m.ttft_ms}, {"tpot", &m.tpot_ms}, {"itl", &m.itl_ms}, {"e2el", &m.e2el_ms}};
    const char* titles[] = {"Time to First Token", "Time per Output Token (excl. 1st token)", "Inter-token Latency",
                            "End-to-end Latency"};
    for (size_t k = 0; k < 4; ++k) {
        const std::string name = metrics[k].first;
        const bench::Summary& s = *metrics[k].second;
        std::string upper = name;
        for (auto& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
        table += std::string("---------------") + titles[k] + "----------------\n";
        table += fmt_line(("Mean " + upper + " (ms):").c_str(), s.mean);
        table += fmt_line(("Median " + upper + " (ms):").c_str(), s.median);
        table += fmt_line(("P99 " + upper + " (ms):").c_str(), s.percentiles[0].second);
        out["mean_" + name + "_ms"] = s.mean;
        out["median_" + name + "_ms"] = s.median;
        out["std_" + name + "_ms"] = s.std;
        out["p99_" + name + "_ms"] = s.percentiles[0].second;
    }
    if (!schema.is_null()) {
        int64_t valid = 0;
        for (size_t i = 0; i < texts.size(); ++i)
            if (results[i].success && !J::parse(texts[i], nullptr, false).is_discarded()) ++valid;
        const std::pair<double, double> after = compile_stats();
        const double n_compiled = after.second - compile_before.second;
        const J compile_ms = n_compiled > 0 ? J(1e3 * (after.first - compile_before.first) / n_compiled) : J(nullptr);
        out["response_format_schema"] = schema_path;
        out["json_valid"] = valid;
        out["mean_grammar_compile_ms"] = compile_ms;
        table += "-------------------Structured output--------------\n";
        table += fmt_line("Replies that parse as JSON:", double(valid));
        if (n_compiled > 0) table += fmt_line("Mean grammar compile (ms):", compile_ms.get<double>());
    }
    table += "==================================================\n";
    std::printf("%s", table.c_str());
    J input_lens = J::array(), output_lens = J::array(), ttfts = J::array(), itls = J::array(), errors = J::array();
    for (const auto& r : results) {
        input_lens.push_back(r.prompt_tokens);
        output_lens.push_back(r.output_tokens);
        ttfts.push_back(r.ttft);
        itls.push_back(r.itl);
        errors.push_back(r.error);
    }
    out["input_lens"] = input_lens;
    out["output_lens"] = output_lens;
    out["ttfts"] = ttfts;
    out["itls"] = itls;
    out["generated_texts"] = texts;
    out["errors"] = errors;
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        if (!f) throw Error(json_path + ": cannot create");
        f << out.dump(2, ' ', false, J::error_handler_t::replace) << "\n";
    }
    if (!plot_path.empty()) {
        // Per request (in send order): TTFT and E2EL.
        std::vector<size_t> order(results.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return results[a].start < results[b].start; });
        bench::PlotSeries ttft{"TTFT", {}, {}}, e2el{"E2EL", {}, {}};
        for (size_t k = 0; k < order.size(); ++k) {
            const auto& r = results[order[k]];
            if (!r.success) continue;
            ttft.points.push_back({double(k), r.ttft * 1e3});
            e2el.points.push_back({double(k), r.latency * 1e3});
        }
        bench::write_line_plot(plot_path, "Latency per request (ms)", "request (send order)", "ms", {ttft, e2el});
    }
    return m.failed > 0 ? 1 : 0;
}

}   // namespace kimi::app
