// `kimi-cpp bench machine`: the limits the engine is measured against — streaming read
// bandwidth (a buffer far larger than the last-level cache, 1 thread and all threads) and
// the peak f32 / bf16 multiply-add rate of register-only loops for the best instruction set
// present. Repetitions with min/median/max; a table and --json.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "args.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/machine_probe.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "progress.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

double seconds_of(const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

J stats_json(const std::vector<double>& v) {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return {{"min", s.front()}, {"median", bench::percentile(s, 50)}, {"max", s.back()}};
}

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}
}  // namespace

int cmd_bench_machine(int argc, char** argv) {
    ArgParser args("bench machine", argc, argv);
    const int64_t size_mb = args.integer("--size-mb", 1024);
    const int64_t reps = args.integer("--reps", 5);
    const int64_t threads = args.integer("--threads", ThreadPool::default_threads());
    const std::string json_path = args.str("--json", "");
    const bool quiet = args.flag("--quiet");
    args.done();
    if (size_mb < 16 || size_mb > 1 << 20) throw Error("--size-mb must be in [16, 1048576]");
    if (reps < 1 || reps > 1000) throw Error("--reps must be in [1, 1000]");
    if (threads < 1 || threads > 1024) throw Error("--threads must be in [1, 1024]");

    const int64_t n_words = size_mb * (int64_t(1) << 20) / 8;
    std::unique_ptr<uint64_t, decltype(&std::free)> buf(
        static_cast<uint64_t*>(std::aligned_alloc(64, size_t(n_words) * 8)), &std::free);
    if (!buf) throw Error("cannot allocate " + std::to_string(size_mb) + " MiB");
    ThreadPool pool{int(threads)};
    pool.parallel_ranges(n_words, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) buf.get()[i] = uint64_t(i) * 0x9e3779b97f4a7c15ull;
    });

    Progress bar("bench machine", quiet);
    const double total_steps = double(reps) * 6;
    double done = 0;
    volatile uint64_t sink = 0;
    const double gb = double(n_words) * 8 / 1e9;
    std::vector<double> bw1, bwn, f1, fn, b1, bn;
    std::vector<uint64_t> part(static_cast<size_t>(threads));
    const int64_t iters = 20'000'000;
    std::string isa_f32, isa_bf16;
    for (int64_t r = 0; r < reps; ++r) {
        bw1.push_back(gb / seconds_of([&] { sink = sink + cpu::read_sum(buf.get(), n_words); }));
        bar.update(++done, total_steps, "probes");
        bwn.push_back(gb / seconds_of([&] {
                          pool.parallel_ranges(n_words, [&](int64_t b, int64_t e, int w) {
                              part[size_t(w)] = cpu::read_sum(buf.get() + b, e - b);
                          });
                      }));
        for (uint64_t p : part) sink = sink + p;
        bar.update(++done, total_steps, "probes");
        cpu::PeakResult pr;
        f1.push_back(seconds_of([&] { pr = cpu::fma_f32_loop(iters); }));
        f1.back() = pr.flops / f1.back() / 1e9;
        isa_f32 = pr.isa;
        bar.update(++done, total_steps, "probes");
        double flops = 0;
        const double t = seconds_of([&] {
            pool.parallel_ranges(threads, [&](int64_t b, int64_t e, int) {
                for (int64_t k = b; k < e; ++k) {
                    const cpu::PeakResult q = cpu::fma_f32_loop(iters);
                    sink = sink + uint64_t(q.sink);
                }
            });
        });
        flops = pr.flops * double(threads);
        fn.push_back(flops / t / 1e9);
        bar.update(++done, total_steps, "probes");
        b1.push_back(seconds_of([&] { pr = cpu::fma_bf16_loop(iters); }));
        b1.back() = pr.flops / b1.back() / 1e9;
        isa_bf16 = pr.isa;
        bar.update(++done, total_steps, "probes");
        const double tb = seconds_of([&] {
            pool.parallel_ranges(threads, [&](int64_t b, int64_t e, int) {
                for (int64_t k = b; k < e; ++k) sink = sink + uint64_t(cpu::fma_bf16_loop(iters).sink);
            });
        });
        bn.push_back(pr.flops * double(threads) / tb / 1e9);
        bar.update(++done, total_steps, "probes");
    }
    bar.finish();

    J out = {{"benchmark", "machine"},
             {"cpu", cpu_model()},
             {"cpu_flags", cpu::cpu_features_string()},
             {"threads", threads},
             {"buffer_mib", size_mb},
             {"reps", reps},
             {"read_bandwidth_gbs", {{"1_thread", stats_json(bw1)}, {"all_threads", stats_json(bwn)}}},
             {"peak_gflops",
              {{"f32", {{"isa", isa_f32}, {"1_thread", stats_json(f1)}, {"all_threads", stats_json(fn)}}},
               {"bf16", {{"isa", isa_bf16}, {"1_thread", stats_json(b1)}, {"all_threads", stats_json(bn)}}}}}};
    std::printf("machine: %s (%s), %lld threads\n\n", out["cpu"].get<std::string>().c_str(),
                out["cpu_flags"].get<std::string>().c_str(), (long long)threads);
    std::printf("| probe | 1 thread (median [min, max]) | %lld threads (median [min, max]) |\n| --- | --- | --- |\n",
                (long long)threads);
    auto row = [&](const char* name, const J& a, const J& b, const char* unit) {
        std::printf("| %s | %.1f [%.1f, %.1f] %s | %.1f [%.1f, %.1f] %s |\n", name, a["median"].get<double>(),
                    a["min"].get<double>(), a["max"].get<double>(), unit, b["median"].get<double>(), b["min"].get<double>(),
                    b["max"].get<double>(), unit);
    };
    row("read bandwidth", out["read_bandwidth_gbs"]["1_thread"], out["read_bandwidth_gbs"]["all_threads"], "GB/s");
    row(("f32 FMA peak (" + isa_f32 + ")").c_str(), out["peak_gflops"]["f32"]["1_thread"], out["peak_gflops"]["f32"]["all_threads"], "GFLOP/s");
    row(("bf16 FMA peak (" + isa_bf16 + ")").c_str(), out["peak_gflops"]["bf16"]["1_thread"], out["peak_gflops"]["bf16"]["all_threads"], "GFLOP/s");
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        if (!f) throw Error(json_path + ": cannot create");
        f << out.dump(2) << "\n";
    }
    (void)sink;
    return 0;
}

}  // namespace kimi::app
