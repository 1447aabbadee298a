// `kimi-cpp bench machine`: the limits the engine is measured against — streaming read
// bandwidth (a buffer far larger than the last-level cache, 1 thread and all threads) and
// the peak f32 / bf16 multiply-add rate of register-only loops for the best instruction set
// present, and of the AMX-BF16 tiles (TDPBF16PS) where this process may use them (else the
// reason, in one line under the table and in the JSON). Repetitions with min/median/max; a
// table and --json.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "args.h"
#include "backend/cpu/amx_support.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "machine_limits.h"
#include "progress.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

J stats_json(const std::vector<double>& v) {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return {{"min", s.front()}, {"median", bench::percentile(s, 50)}, {"max", s.back()}};
}

}   // namespace

int cmd_bench_machine(int argc, char** argv) {
    ArgParser args("bench machine", argc, argv);
    const int64_t size_mb = args.integer("--size-mb", 1024, 16, 1 << 20);
    const int64_t reps = args.integer("--reps", 5, 1, 1000);
    const int64_t threads = args.integer("--threads", ThreadPool::default_threads(), 1, 1024);
    const std::string json_path = args.str("--json", "");
    const bool quiet = args.flag("--quiet");
    args.done();

    ThreadPool pool{int(threads)};
    const ProbeBuffer buf(pool, size_mb * (int64_t(1) << 20) / 8);
    Progress bar("bench machine", quiet);
    const cpu::AmxSupport& amx = cpu::amx_support();
    const double total_steps = double(reps) * (amx.usable ? 8 : 6);
    double done = 0;
    std::vector<double> bw1, bwn, f1, fn, b1, bn, a1, an;
    std::string isa_f32, isa_bf16, isa_amx;
    for (int64_t r = 0; r < reps; ++r) {
        bw1.push_back(read_gbs(buf, nullptr));
        bar.update(++done, total_steps, "probes");
        bwn.push_back(read_gbs(buf, &pool));
        bar.update(++done, total_steps, "probes");
        f1.push_back(peak_gflops(false, nullptr, isa_f32));
        bar.update(++done, total_steps, "probes");
        fn.push_back(peak_gflops(false, &pool, isa_f32));
        bar.update(++done, total_steps, "probes");
        b1.push_back(peak_gflops(true, nullptr, isa_bf16));
        bar.update(++done, total_steps, "probes");
        bn.push_back(peak_gflops(true, &pool, isa_bf16));
        bar.update(++done, total_steps, "probes");
        if (!amx.usable) continue;
        a1.push_back(amx_peak_gflops(nullptr, isa_amx));
        bar.update(++done, total_steps, "probes");
        an.push_back(amx_peak_gflops(&pool, isa_amx));
        bar.update(++done, total_steps, "probes");
    }
    bar.finish();

    J out = {{"benchmark", "machine"},
             {"cpu", cpu_model()},
             {"cpu_flags", cpu::cpu_features_string()},
             {"cache_bytes",
              {{"l1d", cpu::cache_sizes().l1d}, {"l2", cpu::cache_sizes().l2}, {"l3", cpu::cache_sizes().l3}}},
             {"threads", threads},
             {"buffer_mib", size_mb},
             {"reps", reps},
             {"read_bandwidth_gbs", {{"1_thread", stats_json(bw1)}, {"all_threads", stats_json(bwn)}}},
             {"peak_gflops",
              {{"f32", {{"isa", isa_f32}, {"1_thread", stats_json(f1)}, {"all_threads", stats_json(fn)}}},
               {"bf16", {{"isa", isa_bf16}, {"1_thread", stats_json(b1)}, {"all_threads", stats_json(bn)}}}}}};
    // The tile peak beside the vector one: an object shaped like peak_gflops.bf16, or null
    // with the reason the tiles are not usable here.
    out["amx_bf16_gflops"] =
        amx.usable ? J{{"isa", isa_amx}, {"1_thread", stats_json(a1)}, {"all_threads", stats_json(an)}} : J(nullptr);
    out["amx_why_not"] = amx.usable ? J(nullptr) : J(amx.why_not);
    out["matmul_units"] = cpu::matmul_units();   // what the engine's bf16 products run on here
    std::printf(
        "machine: %s (%s), %lld threads; caches L1d %lld KiB, L2 %lld KiB, L3 %lld MiB\n"
        "the engine's bf16 matrix products run on: %s\n\n",
        out["cpu"].get<std::string>().c_str(), out["cpu_flags"].get<std::string>().c_str(), (long long)threads,
        (long long)(cpu::cache_sizes().l1d >> 10), (long long)(cpu::cache_sizes().l2 >> 10),
        (long long)(cpu::cache_sizes().l3 >> 20), cpu::matmul_units().c_str());
    std::printf("| probe | 1 thread (median [min, max]) | %lld threads (median [min, max]) |\n| --- | --- | --- |\n",
                (long long)threads);
    auto row = [&](const char* name, const J& a, const J& b, const char* unit) {
        std::printf("| %s | %.1f [%.1f, %.1f] %s | %.1f [%.1f, %.1f] %s |\n", name, a["median"].get<double>(),
                    a["min"].get<double>(), a["max"].get<double>(), unit, b["median"].get<double>(),
                    b["min"].get<double>(), b["max"].get<double>(), unit);
    };
    row("read bandwidth", out["read_bandwidth_gbs"]["1_thread"], out["read_bandwidth_gbs"]["all_threads"], "GB/s");
    row(("f32 FMA peak (" + isa_f32 + ")").c_str(), out["peak_gflops"]["f32"]["1_thread"],
        out["peak_gflops"]["f32"]["all_threads"], "GFLOP/s");
    row(("bf16 FMA peak (" + isa_bf16 + ")").c_str(), out["peak_gflops"]["bf16"]["1_thread"],
        out["peak_gflops"]["bf16"]["all_threads"], "GFLOP/s");
    if (amx.usable)
        row(("bf16 tile peak (" + isa_amx + ")").c_str(), out["amx_bf16_gflops"]["1_thread"],
            out["amx_bf16_gflops"]["all_threads"], "GFLOP/s");
    else
        std::printf("\nAMX tile peak: not measured (%s)\n", amx.why_not.c_str());
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        if (!f) throw Error(json_path + ": cannot create");
        f << out.dump(2) << "\n";
    }
    return 0;
}

}   // namespace kimi::app
