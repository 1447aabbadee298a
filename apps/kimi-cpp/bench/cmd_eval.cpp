// `kimi-cpp eval compare A.jsonl B.jsonl [--json]`: pairs two evaluation runs' samples by
// `id` and, per scorer (`correct`, and every name in `correct_by_scorer` when both runs
// have it), prints the 2×2 table and the exact two-sided McNemar p-value.
#include <cstdio>
#include <map>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "args.h"
#include "bench/jsonl.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

struct Sample {
    bool correct = false;
    std::map<std::string, bool> by_scorer;
};

std::map<std::string, Sample> read_samples(const std::string& path) {
    std::map<std::string, Sample> out;
    for (const bench::JsonLine& l : bench::read_jsonl(path)) {
        const J& j = l.value;
        if (!j.is_object() || !j.contains("id") || !j.contains("correct") || !j["correct"].is_boolean())
            throw Error(l.where + ": a sample needs \"id\" and a boolean \"correct\"");
        const std::string id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
        Sample s;
        s.correct = j["correct"].get<bool>();
        if (j.contains("correct_by_scorer") && j["correct_by_scorer"].is_object())
            for (auto it = j["correct_by_scorer"].begin(); it != j["correct_by_scorer"].end(); ++it)
                if (it.value().is_boolean()) s.by_scorer[it.key()] = it.value().get<bool>();
        if (!out.emplace(id, std::move(s)).second) throw Error(l.where + ": duplicate id " + id);
    }
    return out;
}
}   // namespace

int cmd_eval_compare(int argc, char** argv) {
    ArgParser args("eval compare", argc, argv);
    const bool json = args.flag("--json");
    const std::vector<std::string> files = args.positionals();
    args.done();
    if (files.size() != 2) throw Error("usage: kimi-cpp eval compare A.jsonl B.jsonl [--json]");
    const auto a = read_samples(files[0]), b = read_samples(files[1]);
    std::vector<std::string> ids;
    for (const auto& [id, s] : a)
        if (b.count(id)) ids.push_back(id);
    if (ids.empty()) throw Error("no sample id is in both files");

    // Scorers: the primary `correct`, then those every paired sample of both runs carries.
    std::vector<std::string> scorers = {"correct"};
    std::set<std::string> common;
    bool first = true;
    for (const auto& id : ids) {
        std::set<std::string> here;
        for (const auto& [k, v] : a.at(id).by_scorer)
            if (b.at(id).by_scorer.count(k)) here.insert(k);
        if (first)
            common = here;
        else {
            std::set<std::string> keep;
            for (const auto& k : common)
                if (here.count(k)) keep.insert(k);
            common = keep;
        }
        first = false;
    }
    scorers.insert(scorers.end(), common.begin(), common.end());

    J out = {{"a", files[0]},
             {"b", files[1]},
             {"n_paired", ids.size()},
             {"only_in_a", a.size() - ids.size()},
             {"only_in_b", b.size() - ids.size()},
             {"scorers", J::object()}};
    if (!json)
        std::printf("paired samples: %zu (unpaired: %zu only in A, %zu only in B)\n\n", ids.size(),
                    a.size() - ids.size(), b.size() - ids.size());
    for (const auto& sc : scorers) {
        int64_t both = 0, only_a = 0, only_b = 0, neither = 0;
        for (const auto& id : ids) {
            const bool ca = sc == "correct" ? a.at(id).correct : a.at(id).by_scorer.at(sc);
            const bool cb = sc == "correct" ? b.at(id).correct : b.at(id).by_scorer.at(sc);
            both += ca && cb;
            only_a += ca && !cb;
            only_b += !ca && cb;
            neither += !ca && !cb;
        }
        const double n = double(ids.size());
        const double p = bench::mcnemar_exact_p(only_a, only_b);
        out["scorers"][sc] = {{"both_correct", both},
                              {"only_a", only_a},
                              {"only_b", only_b},
                              {"both_wrong", neither},
                              {"accuracy_a", double(both + only_a) / n},
                              {"accuracy_b", double(both + only_b) / n},
                              {"mcnemar_p", p}};
        if (!json) {
            std::printf("scorer %s: accuracy A %.4f, B %.4f\n", sc.c_str(), double(both + only_a) / n,
                        double(both + only_b) / n);
            std::printf(
                "| | B correct | B wrong |\n| --- | --- | --- |\n| A correct | %lld | %lld |\n| A wrong | %lld | %lld "
                "|\n",
                (long long)both, (long long)only_a, (long long)only_b, (long long)neither);
            std::printf("exact McNemar (two-sided): %lld only-A vs %lld only-B discordant pairs, p = %.4f\n\n",
                        (long long)only_a, (long long)only_b, p);
        }
    }
    if (json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
}

int cmd_eval_gsm8k(int argc, char** argv);   // cmd_eval_gsm8k.cpp
int cmd_eval_tasks(int argc, char** argv);   // cmd_eval_tasks.cpp

int cmd_eval(int argc, char** argv) {
    if (argc < 1) throw Error("usage: kimi-cpp eval gsm8k|tasks|compare [flags]");
    const std::string what = argv[0];
    if (what == "--help" || what == "-h") {
        std::printf(
            "usage: kimi-cpp eval gsm8k|tasks|compare [flags]\n(kimi-cpp eval WHAT --help: the flags of one)\n");
        return 0;
    }
    if (what == "compare") return cmd_eval_compare(argc - 1, argv + 1);
    if (what == "gsm8k") return cmd_eval_gsm8k(argc - 1, argv + 1);
    if (what == "tasks") return cmd_eval_tasks(argc - 1, argv + 1);
    throw Error("unknown eval '" + what + "' (eval gsm8k, eval tasks, eval compare)");
}

}   // namespace kimi::app
