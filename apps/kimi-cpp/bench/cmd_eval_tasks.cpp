// `kimi-cpp eval tasks`: the default model's evaluation set (src/bench/task_eval.h,
// docs/measuring.md#tasks) through the OpenAI chat route: against a running server
// (--base-url), or against one or more models (--model [LABEL=]PATH, repeatable), each served
// in-process on 127.0.0.1 by the server itself. Greedy (temperature 0). A multiplication is
// two turns: the model's calculator call, the harness's result, the model's answer. Writes one
// JSONL line per item and model, prints per-task exact-match accuracy, and with several
// models the exact McNemar test of each against the first, per task and overall.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "args.h"
#include "bench/sse_client.h"
#include "bench/stats.h"
#include "bench/task_eval.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "media_options.h"
#include "progress.h"
#include "server/http_server.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

struct Settings {
    std::vector<bench::TaskItem> items;
    int32_t max_tokens = 256;
    int64_t seed = 0;
    size_t concurrency = 4;
    bool quiet = false;
};

// One model served in-process, as `serve` serves it (the same HttpServer), on a free port.
class LocalServer {
public:
    LocalServer(const std::string& label, const std::string& path, const EngineOptions& eo, const MediaOptions& media,
                int32_t min_seqs, bool quiet) {
        model_ = load_model_with_progress(path, quiet, eo.weight_memory, eo.shard, eo.check_weights);
        tok_ = load_tokenizer_for(path, model_->config(), true);
        EngineConfig ec = eo.with_model_precision(*model_);
        ec.max_num_seqs = std::max(ec.max_num_seqs, min_seqs);
        engine_ = std::make_unique<Engine>(*model_, ec, &*tok_);
        loader_ = make_media_loader(*model_, path, media);
        encoder_ = make_vision_encoder(*model_, ec.precision, ec.threads, media);
        server::ServerConfig sc;
        sc.port = 0;
        sc.served_model_name = label;
        sc.access_log = false;
        sc.log_level = 2;
        http_ = std::make_unique<server::HttpServer>(sc);
        http_->start();
        http_->set_media(loader_.get(), encoder_.get());
        engine_->start();
        http_->set_ready(engine_.get(), &*tok_, &model_->config());
    }
    ~LocalServer() {
        http_->shutdown();
        engine_->stop();
    }
    LocalServer(const LocalServer&) = delete;
    LocalServer& operator=(const LocalServer&) = delete;
    bench::Endpoint endpoint() const {
        return bench::parse_base_url("http://127.0.0.1:" + std::to_string(http_->port()));
    }
    bool images() const { return encoder_ != nullptr; }

private:
    std::unique_ptr<KimiModel> model_;
    std::optional<tok::Tokenizer> tok_;
    std::unique_ptr<Engine> engine_;
    std::unique_ptr<server::MediaLoader> loader_;
    std::unique_ptr<VisionEncoder> encoder_;
    std::unique_ptr<server::HttpServer> http_;
};

struct Sample {
    bool skipped = false, correct = false;
    J record;
};

// POST a chat body: the reply's message, or an error text in `error`.
J chat(const bench::Endpoint& ep, J body, std::string& error) {
    auto [status, j] = bench::post_json(ep, "/v1/chat/completions", body);
    if (status != 200 || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() ||
        !j["choices"][0].contains("message")) {
        error = "HTTP " + std::to_string(status) + ": " + j.dump().substr(0, 300);
        return J::object();
    }
    return j["choices"][0]["message"];
}

// The two turns of a multiplication: the call (valid arguments whose expression evaluates to
// the product), then the answer after the harness's result.
void run_multiplication(const bench::Endpoint& ep, const bench::TaskItem& it, J body, const J& first, Sample& s) {
    const auto call = bench::calculator_call(first);
    const J& expected = it.answer.contains("expression") ? it.answer["expression"] : J();
    const auto want = expected.is_string() ? bench::eval_expression(expected.get<std::string>()) : std::nullopt;
    if (!want) throw Error("eval tasks: item " + std::to_string(it.id) + ": the expected expression is not one");
    const std::string product = std::to_string(want.value_or(0));
    std::string result;   // the calculator's answer to the model's expression ("" when none)
    if (call)
        if (const auto v = bench::eval_expression(call->expression)) result = std::to_string(v.value_or(0));
    const bool call_ok = result == product;
    bool final_ok = false;
    s.record["calculator_result"] = result;
    if (!result.empty()) {
        body["messages"].push_back(first);
        body["messages"].push_back({{"role", "tool"}, {"tool_call_id", call->id}, {"content", result}});
        std::string error;
        const J second = chat(ep, body, error);
        s.record["second_reply"] = second;
        if (!error.empty()) s.record["error"] = error;
        bench::TaskItem final_turn;
        final_turn.answer = want.value_or(0);
        final_ok = error.empty() && bench::score_reply(final_turn, second);
    }
    s.record["correct_by_scorer"] = {{"tool_call", call_ok}, {"final_answer", final_ok}};
    s.correct = call_ok && final_ok;
}

Sample run_item(const bench::Endpoint& ep, const std::string& model, const bench::TaskItem& it, const Settings& st,
                bool images) {
    Sample s;
    s.record = {{"id", it.id}, {"task", it.task}, {"answer", it.answer}};
    if (it.has_image && !images) {
        s.skipped = true;
        s.record["skipped"] = "the model has no vision tower";
        return s;
    }
    J body = it.request;
    if (!model.empty()) body["model"] = model;
    body["temperature"] = 0.0;
    body["max_tokens"] = st.max_tokens;
    body["seed"] = st.seed;
    std::string error;
    const J first = chat(ep, body, error);
    s.record["reply"] = first;
    if (!error.empty()) {
        s.record["error"] = error;
    } else if (it.task == "mul") {
        run_multiplication(ep, it, body, first, s);
    } else {
        s.correct = bench::score_reply(it, first);
    }
    s.record["correct"] = s.correct;
    return s;
}

std::vector<Sample> run_all(const bench::Endpoint& ep, const std::string& model, const Settings& st, bool images,
                            const std::string& label) {
    std::vector<Sample> out(st.items.size());
    for_each_parallel(st.items.size(), st.concurrency, "tasks " + label, st.quiet, "items",
                      [&](size_t i) { out[i] = run_item(ep, model, st.items[i], st, images); });
    return out;
}

void write_samples(const std::vector<Sample>& samples, const std::string& path) {
    std::ofstream f(path);
    if (!f) throw Error(path + ": cannot create");
    for (const Sample& s : samples) f << s.record.dump(-1, ' ', false, J::error_handler_t::replace) << "\n";
}

std::vector<std::string> task_order(const Settings& st) {
    std::vector<std::string> order;
    for (const auto& it : st.items)
        if (std::find(order.begin(), order.end(), it.task) == order.end()) order.push_back(it.task);
    std::sort(order.begin(), order.end());
    order.push_back("text");   // the items without an image (what a model without a vision tower runs)
    order.push_back("all");
    return order;
}

// Whether item i counts in row k of the table.
bool in_row(const Settings& st, size_t i, const std::string& k) {
    return k == "all" || (k == "text" ? !st.items[i].has_image : st.items[i].task == k);
}

// Per task (and "all"): n, correct, accuracy of one run.
J tally(const Settings& st, const std::vector<Sample>& samples) {
    J out = J::object();
    for (const std::string& k : task_order(st)) {
        int64_t n = 0, c = 0;
        for (size_t i = 0; i < samples.size(); ++i) {
            if (samples[i].skipped || !in_row(st, i, k)) continue;
            ++n;
            c += samples[i].correct;
        }
        out[k] = {{"n", n}, {"correct", c}, {"accuracy", n ? J(double(c) / double(n)) : J(nullptr)}};
    }
    return out;
}

// Run b against run a, per task: the discordant pairs and the exact McNemar p (items both ran).
J mcnemar_by_task(const Settings& st, const std::vector<Sample>& a, const std::vector<Sample>& b) {
    J out = J::object();
    for (const std::string& k : task_order(st)) {
        int64_t only_a = 0, only_b = 0, n = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            if (a[i].skipped || b[i].skipped || !in_row(st, i, k)) continue;
            ++n;
            only_a += a[i].correct && !b[i].correct;
            only_b += !a[i].correct && b[i].correct;
        }
        out[k] = {{"n_paired", n},
                  {"only_a", only_a},
                  {"only_b", only_b},
                  {"mcnemar_p", bench::mcnemar_exact_p(only_a, only_b)}};
    }
    return out;
}

std::string percent(const J& acc) {
    char buf[32];
    if (acc.is_null()) return "n/a";
    std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * acc.get<double>());
    return buf;
}

void print_table(const Settings& st, const J& runs) {
    std::printf("| task | n |");
    for (const J& r : runs) std::printf(" %s |", r["label"].get<std::string>().c_str());
    std::printf("\n| --- | --- |");
    for (size_t i = 0; i < runs.size(); ++i) std::printf(" --- |");
    std::printf("\n");
    for (const std::string& k : task_order(st)) {
        std::printf("| %s | %lld |", k.c_str(), (long long)runs[0]["tasks"][k]["n"].get<int64_t>());
        for (size_t i = 0; i < runs.size(); ++i) {
            const J& r = runs[i];
            std::string cell = percent(r["tasks"][k]["accuracy"]);
            if (i > 0 && r["tasks"][k]["n"].get<int64_t>() > 0) {
                const J& m = r["vs_first"][k];
                char buf[96];
                std::snprintf(buf, sizeof buf, " (−%lld/+%lld, p %.3g)", (long long)m["only_a"].get<int64_t>(),
                              (long long)m["only_b"].get<int64_t>(), m["mcnemar_p"].get<double>());
                cell += buf;
            }
            std::printf(" %s |", cell.c_str());
        }
        std::printf("\n");
    }
    if (runs.size() > 1)
        std::printf(
            "\n(−a/+b, p: items the first run got right and this one wrong / the reverse, and the exact "
            "two-sided McNemar p-value; image items are n/a for a model without a vision tower)\n");
}

// "LABEL=PATH" or PATH (label: the file or directory name).
std::pair<std::string, std::string> label_and_path(const std::string& spec) {
    const size_t eq = spec.find('=');
    if (eq != std::string::npos && eq > 0) return {spec.substr(0, eq), spec.substr(eq + 1)};
    std::string name = std::filesystem::path(spec).lexically_normal().filename().string();
    if (name.empty()) name = std::filesystem::path(spec).lexically_normal().parent_path().filename().string();
    return {name.empty() ? spec : name, spec};
}

std::string samples_path(const std::string& out, const std::string& label, bool several) {
    if (!several) return out;
    const size_t dot = out.rfind(".jsonl");
    return (dot == std::string::npos ? out : out.substr(0, dot)) + "." + label + ".jsonl";
}

}   // namespace

int cmd_eval_tasks(int argc, char** argv) {
    ArgParser args("eval tasks", argc, argv);
    const auto base_url = args.opt("--base-url", "a running server (its chat route)");
    const std::vector<std::string> models =
        args.list("--model", "[LABEL=]PATH: a model to serve in-process (repeat to compare)");
    const std::string served = args.str("--served-model", "", "with --base-url: the model name to send");
    const auto data_flag = args.opt("--data", "the evaluation set (default: the first model's eval.jsonl)");
    Settings st;
    st.max_tokens = int32_t(args.integer("--max-tokens", 256, 1, 1 << 20));
    st.seed = args.integer("--seed", 0);
    st.concurrency = size_t(args.integer("--max-concurrency", 4, 1, 1024));
    const int64_t limit = args.integer("--limit", 0, 0, int64_t(1) << 40, "only the first N items (0: all)");
    st.quiet = args.flag("--quiet");
    const std::string out = args.str("--out", "tasks_samples.jsonl", "the samples (several models: OUT.LABEL.jsonl)");
    const std::string summary_path = args.str("--json", "", "the summary as JSON");
    const std::string api_key = args.str("--api-key", "");
    const MediaOptions media = parse_media_options(args);
    const EngineOptions eo = parse_engine_options(args);
    args.done();
    require_one_process(eo, "eval tasks");
    if (bool(base_url) == !models.empty()) throw Error("eval tasks: give --base-url URL or --model PATH (repeatable)");
    std::vector<std::pair<std::string, std::string>> runs_spec;
    std::set<std::string> labels;
    for (const std::string& m : models) {
        runs_spec.push_back(label_and_path(m));
        if (!labels.insert(runs_spec.back().first).second)
            throw Error("eval tasks: two models labelled '" + runs_spec.back().first + "': name them LABEL=PATH");
    }
    std::string data = data_flag.value_or("");
    if (data.empty()) {
        if (models.empty()) throw Error("eval tasks: --base-url needs --data FILE");
        const std::filesystem::path p = runs_spec[0].second;
        data = (std::filesystem::is_directory(p) ? p : p.parent_path()) / "eval.jsonl";
    }
    st.items = bench::read_task_items(data);
    if (limit > 0 && size_t(limit) < st.items.size()) st.items.resize(size_t(limit));

    J runs = J::array();
    std::vector<std::vector<Sample>> all;
    const auto t0 = std::chrono::steady_clock::now();
    auto finish_run = [&](const std::string& label, std::vector<Sample> samples, double secs) {
        const std::string path = samples_path(out, label, runs_spec.size() > 1);
        write_samples(samples, path);
        J r = {{"label", label}, {"samples", path}, {"duration_s", secs}, {"tasks", tally(st, samples)}};
        if (!all.empty()) r["vs_first"] = mcnemar_by_task(st, all[0], samples);
        runs.push_back(std::move(r));
        all.push_back(std::move(samples));
    };
    if (base_url) {
        bench::Endpoint ep = bench::parse_base_url(*base_url);
        ep.api_key = api_key;
        auto samples = run_all(ep, served, st, true, "server");
        finish_run(served.empty() ? "server" : served, std::move(samples),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    for (const auto& [label, path] : runs_spec) {
        const auto t1 = std::chrono::steady_clock::now();
        LocalServer server(label, path, eo, media, int32_t(st.concurrency), st.quiet);
        auto samples = run_all(server.endpoint(), label, st, server.images(), label);
        finish_run(label, std::move(samples),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    }
    std::printf("eval tasks: %zu items of %s, greedy\n\n", st.items.size(), data.c_str());
    print_table(st, runs);
    if (!summary_path.empty()) {
        std::ofstream f(summary_path);
        if (!f) throw Error(summary_path + ": cannot create");
        f << J{{"data", data}, {"n_items", st.items.size()}, {"runs", runs}}.dump(2) << "\n";
    }
    return 0;
}

}   // namespace kimi::app
