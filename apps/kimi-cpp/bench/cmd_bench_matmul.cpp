// `kimi-cpp bench matmul`: one matrix product in isolation, at the shapes of a model's big
// projections, through the same op the model calls. Each --shapes OxI gets enough copies of
// its bf16 weights (on 2 MiB-aligned memory advised for huge pages, as the loaded weights)
// to cycle through at least --working-set-mb, so every call reads its weights from DRAM as a
// decode step does. For each --tokens T: the median time per product, the weight read
// rate (GB/s, against the read bandwidth probed just before the row) and the multiply-add
// rate (GFLOP/s, against the measured peak). Prints a table; --json.
// --weight-dtype Q4_K (any GGUF block type, by ggml's name) times the block products instead,
// on blocks of random bytes whose 16-bit fields are kept below 1 in f16 (no Inf/NaN scales).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "args.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "core/rng.h"
#include "machine_limits.h"
#include "ops/ops.h"
#include "progress.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

std::pair<int64_t, int64_t> parse_shape(const std::string& s) {
    const size_t x = s.find('x');
    try {
        if (x != std::string::npos) {
            const int64_t o = std::stoll(s.substr(0, x)), i = std::stoll(s.substr(x + 1));
            if (o > 0 && i > 0 && o <= (int64_t(1) << 20) && i <= (int64_t(1) << 20)) return {o, i};
        }
    } catch (const std::exception&) {}
    throw Error("--shapes: '" + s + "' is not OUTxIN (e.g. 12288x7168)");
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}   // namespace

int cmd_bench_matmul(int argc, char** argv) {
    ArgParser args("bench matmul", argc, argv);
    std::vector<std::string> shape_args;
    {
        std::stringstream in(args.str("--shapes", "12288x7168,33792x7168,3584x7168,7168x3584"));
        for (std::string s; std::getline(in, s, ',');) shape_args.push_back(s);
    }
    const std::vector<int32_t> tokens = parse_int_list("--tokens", args.str("--tokens", "1,16,512"));
    const int64_t reps = args.integer("--reps", 5), ws_mb = args.integer("--working-set-mb", 1024);
    const int64_t threads = args.integer("--threads", ThreadPool::default_threads());
    const std::string dtype = args.str("--activation-dtype", "bf16"), json_path = args.str("--json", "");
    const std::string wdtype_name = args.str("--weight-dtype", "BF16");
    const bool quiet = args.flag("--quiet");
    args.done();
    DType wdtype = DType::kBF16;
    if (!dtype_from_name(wdtype_name, wdtype) || (wdtype != DType::kBF16 && !is_block_quant(wdtype)))
        throw Error("--weight-dtype: '" + wdtype_name + "' is not BF16 or a GGUF block type (Q4_K, Q8_0, ...)");
    const BlockShape blk = dtype_block(wdtype);
    if (reps < 1 || reps > 1000) throw Error("--reps must be in [1, 1000]");
    if (ws_mb < 1 || ws_mb > (1 << 20)) throw Error("--working-set-mb must be in [1, 1048576]");
    if (threads < 1 || threads > 1024) throw Error("--threads must be in [1, 1024]");
    if (dtype != "bf16" && dtype != "f32") throw Error("--activation-dtype must be bf16 or f32");
    for (int32_t t : tokens)
        if (t < 1 || t > 65536) throw Error("--tokens must be in [1, 65536]");
    const Precision prec = dtype == "bf16" ? Precision::kBF16 : Precision::kF32;

    ThreadPool pool{int(threads)};
    const ProbeBuffer probe(pool, int64_t(512) << 17);
    BandwidthSamples bws;
    std::string isa;
    double peak = 0;
    for (int r = 0; r < 2; ++r) peak = std::max(peak, peak_gflops(prec == Precision::kBF16, &pool, isa));
    Arena arena(size_t(64) << 20);
    Exec ex;
    ex.pool = &pool;
    ex.arena = &arena;
    ex.precision = prec;
    Rng rng(7);
    Progress bar("bench matmul", quiet);
    const double total = double(shape_args.size() * tokens.size());
    double done = 0;
    J rows = J::array();
    std::printf(
        "| shape (out x in) | tokens | ms (median [min, max]) | weight GB/s | %% of probe | GFLOP/s | %% of peak |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    for (const std::string& sa : shape_args) {
        const auto [out, in] = parse_shape(sa);
        if (in % blk.elems != 0)
            throw Error("--shapes: " + sa + ": IN must be a multiple of " + std::to_string(blk.elems) + " for " +
                        wdtype_name);
        const size_t w_bytes = size_t(out * (in / blk.elems) * blk.bytes);
        const int64_t copies = std::max<int64_t>(1, int64_t((size_t(ws_mb) << 20) / w_bytes));
        HugeBuffer wbuf(w_bytes * size_t(copies));
        auto* wb = reinterpret_cast<uint16_t*>(wbuf.data());
        const bool bf16 = wdtype == DType::kBF16;
        pool.parallel_ranges(int64_t(w_bytes / 2) * copies, [&](int64_t b, int64_t e, int) {
            for (int64_t k = b; k < e; ++k) {
                const uint64_t h = uint64_t(k) * 0x9e3779b97f4a7c15ull;
                wb[k] = bf16 ? uint16_t(0x3c00 + (h >> 57)) : uint16_t((h >> 48) & 0x3BFF);
            }
        });
        for (int32_t t : tokens) {
            std::vector<float> xs(size_t(t) * size_t(in)), ys(size_t(t) * size_t(out));
            for (float& v : xs) v = float(rng.uniform()) - 0.5f;
            Tensor x(xs.data(), DType::kF32, {t, in}), y(ys.data(), DType::kF32, {t, out});
            sample_bandwidth(probe, pool, 2, bws);
            const double row_gbs = 0.5 * (bws.gbs.end()[-1] + bws.gbs.end()[-2]);
            std::vector<double> ms;
            for (int64_t r = -1; r < reps * copies; ++r) {   // r = -1 warms up (scratch, arena)
                Tensor w(wbuf.data() + size_t((r + copies) % copies) * w_bytes, wdtype, {out, in});
                const double t0 = now_s();
                ops::matmul(ex, x, w, prec, y);
                if (r >= 0) ms.push_back(1e3 * (now_s() - t0));
                arena.reset();
            }
            std::sort(ms.begin(), ms.end());
            const double med = bench::percentile(ms, 50);
            const double gbs = double(w_bytes) / 1e6 / med, gflops = 2.0 * double(out * in) * t / 1e6 / med;
            rows.push_back({{"shape", sa},
                            {"out", out},
                            {"in", in},
                            {"tokens", t},
                            {"ms", {{"min", ms.front()}, {"median", med}, {"max", ms.back()}}},
                            {"weight_gbs", gbs},
                            {"probe_gbs", row_gbs},
                            {"pct_of_probe", 100.0 * gbs / row_gbs},
                            {"gflops", gflops},
                            {"pct_of_peak", 100.0 * gflops / peak}});
            std::printf("| %s | %d | %.3f [%.3f, %.3f] | %.1f | %.1f%% | %.1f | %.1f%% |\n", sa.c_str(), t, med,
                        ms.front(), ms.back(), gbs, 100.0 * gbs / row_gbs, gflops, 100.0 * gflops / peak);
            bar.update(++done, total, "rows");
        }
    }
    bar.finish();
    std::printf(
        "\n%s, %lld threads: read bandwidth %.1f GB/s (median of %zu probes; min %.1f, max %.1f), %s peak %.1f "
        "GFLOP/s; %s weights, %s activations\n",
        cpu_model().c_str(), (long long)threads, bws.median(), bws.gbs.size(), bws.min(), bws.max(), isa.c_str(), peak,
        dtype_name(wdtype), dtype.c_str());
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        if (!f) throw Error(json_path + ": cannot create");
        f << J{{"benchmark", "matmul"},
               {"cpu", cpu_model()},
               {"threads", threads},
               {"activation_dtype", dtype},
               {"weight_dtype", dtype_name(wdtype)},
               {"read_bandwidth_gbs", bws.median()},
               {"read_bandwidth_samples_gbs", bws.gbs},
               {"peak_gflops", peak},
               {"peak_isa", isa},
               {"rows", rows}}
                 .dump(2)
          << "\n";
    }
    return 0;
}

}   // namespace kimi::app
