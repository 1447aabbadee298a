// `kimi-cpp bench matmul`: one matrix product in isolation, at the shapes of a model's big
// projections, through the same op the model calls. Each --shapes OxI gets enough copies of
// its bf16 weights (on 2 MiB-aligned memory advised for huge pages, as the loaded weights)
// to cycle through at least --working-set-mb, so every call reads its weights from DRAM as a
// decode step does. For each --tokens T: the median time per product, the weight read
// rate (GB/s, against the read bandwidth probed just before the row) and the multiply-add
// rate (GFLOP/s, against the measured peak). Prints a table; --json.
// --weight-dtype Q4_K (any GGUF block type, by ggml's name) times the block products instead,
// on blocks of random bytes whose 16-bit fields are kept below 1 in f16 (no Inf/NaN scales).
// --compare-torch (bf16 activations and BF16 weights) then runs torch.nn.functional.linear in
// bf16 over the same shapes, token counts, reps and working set with the same threads
// (tools/torch_baseline/torch_matmul.py, torch_compare.h), and the table and rows gain torch's
// time, its GFLOP/s and the ratio of ours to it (> 1: kimi.cpp faster).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend/cpu/matmul_kernel.h"
#include "args.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "core/rng.h"
#include "machine_limits.h"
#include "ops/ops.h"
#include "progress.h"
#include "torch_compare.h"

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

// Adds torch's figures to each of our rows (matched by out, in and tokens): torch_ms,
// torch_gflops and speedup_vs_torch (our GFLOP/s over torch's).
void join_torch_matmul(J& rows, const J& torch_rows) {
    for (J& row : rows) {
        const J* hit = nullptr;
        for (const J& t : torch_rows)
            if (t.value("out", int64_t(-1)) == row["out"].get<int64_t>() &&
                t.value("in", int64_t(-1)) == row["in"].get<int64_t>() &&
                t.value("tokens", -1) == row["tokens"].get<int>())
                hit = &t;
        if (!hit || !hit->contains("ms") || !hit->contains("gflops"))
            throw Error("--compare-torch: the PyTorch baseline has no row for " + row["shape"].get<std::string>() +
                        " at " + std::to_string(row["tokens"].get<int>()) + " tokens");
        const double theirs = (*hit)["gflops"].get<double>();
        row["torch_ms"] = (*hit)["ms"];
        row["torch_gflops"] = theirs;
        row["speedup_vs_torch"] = theirs > 0 ? row["gflops"].get<double>() / theirs : 0.0;
    }
}

// One table row from a JSON row; with torch's columns once they are joined.
void print_row(const J& r, bool torch) {
    const J& ms = r["ms"];
    std::printf("| %s | %d | %.3f [%.3f, %.3f] | %.1f | %.1f%% | %.1f | %.1f%% |",
                r["shape"].get<std::string>().c_str(), r["tokens"].get<int>(), ms["median"].get<double>(),
                ms["min"].get<double>(), ms["max"].get<double>(), r["weight_gbs"].get<double>(),
                r["pct_of_probe"].get<double>(), r["gflops"].get<double>(), r["pct_of_peak"].get<double>());
    if (torch) {
        const J& t = r["torch_ms"];
        std::printf(" %.3f [%.3f, %.3f] | %.1f | %.2f |", t["median"].get<double>(), t["min"].get<double>(),
                    t["max"].get<double>(), r["torch_gflops"].get<double>(), r["speedup_vs_torch"].get<double>());
    }
    std::printf("\n");
}
}   // namespace

int cmd_bench_matmul(int argc, char** argv) {
    ArgParser args("bench matmul", argc, argv);
    std::vector<std::string> shape_args;
    {
        std::stringstream in(args.str("--shapes", "12288x7168,33792x7168,3584x7168,7168x3584"));
        for (std::string s; std::getline(in, s, ',');) shape_args.push_back(s);
    }
    const std::vector<int32_t> tokens = parse_int_list("--tokens", args.str("--tokens", "1,16,512"));
    const int64_t reps = args.integer("--reps", 5, 1, 1000),
                  ws_mb = args.integer("--working-set-mb", 1024, 1, (1 << 20));
    const int64_t threads = args.integer("--threads", ThreadPool::default_threads(), 1, 1024);
    const std::string dtype = args.str("--activation-dtype", "bf16"), json_path = args.str("--json", "");
    const std::string wdtype_name = args.str("--weight-dtype", "BF16");
    const bool quiet = args.flag("--quiet");
    const bool compare_torch = args.flag("--compare-torch");
    TorchMatmulOptions torch_opt;
    torch_opt.script = args.str("--torch-script", default_torch_matmul_script());
    torch_opt.python = args.str("--python", torch_opt.python);
    args.done();
    DType wdtype = DType::kBF16;
    if (!dtype_from_name(wdtype_name, wdtype) || (wdtype != DType::kBF16 && !is_block_quant(wdtype)))
        throw Error("--weight-dtype: '" + wdtype_name + "' is not BF16 or a GGUF block type (Q4_K, Q8_0, ...)");
    const BlockShape blk = dtype_block(wdtype);
    if (dtype != "bf16" && dtype != "f32") throw Error("--activation-dtype must be bf16 or f32");
    for (int32_t t : tokens)
        if (t < 1 || t > 65536) throw Error("--tokens must be in [1, 65536]");
    const Precision prec = dtype == "bf16" ? Precision::kBF16 : Precision::kF32;
    if (compare_torch) {
        if (dtype != "bf16" || wdtype != DType::kBF16)
            throw Error(
                "--compare-torch compares bf16 products only: --activation-dtype bf16 with --weight-dtype BF16");
        check_torch_script(torch_opt.python, torch_opt.script);
    }

    ThreadPool pool{int(threads)};
    const ProbeBuffer probe(pool, int64_t(512) << 17);
    BandwidthSamples bws;
    std::string isa;
    double peak = 0;
    for (int r = 0; r < 2; ++r) peak = std::max(peak, unit_peak_gflops(prec == Precision::kBF16, &pool, isa));
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
    // With --compare-torch the table waits for the baseline, which runs after all our rows.
    auto print_header = [compare_torch] {
        std::printf(
            "| shape (out x in) | tokens | ms (median [min, max]) | weight GB/s | %% of probe | GFLOP/s | %% of peak "
            "|%s\n",
            compare_torch ? " torch ms | torch GFLOP/s | ratio |" : "");
        std::printf("| --- | --- | --- | --- | --- | --- | --- |%s\n", compare_torch ? " --- | --- | --- |" : "");
    };
    if (!compare_torch) print_header();
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
            if (!compare_torch) print_row(rows.back(), false);
            bar.update(++done, total, "rows");
        }
    }
    bar.finish();
    J torch_info = nullptr;
    if (compare_torch) {
        torch_opt.shapes = shape_args;
        torch_opt.tokens = tokens;
        torch_opt.reps = reps;
        torch_opt.working_set_mb = ws_mb;
        torch_opt.threads = int(threads);
        torch_opt.quiet = quiet;
        const J t = run_torch_matmul(torch_opt);
        join_torch_matmul(rows, t["rows"]);
        torch_info = t.value("torch", J::object());
        torch_info["benchmark"] = t.value("benchmark", "");
        torch_info["script"] = torch_opt.script;
        torch_info["rows"] = t["rows"];
        print_header();
        for (const J& r : rows) print_row(r, true);
    }
    std::printf(
        "\n%s, %lld threads: read bandwidth %.1f GB/s (median of %zu probes; min %.1f, max %.1f), %s peak %.1f "
        "GFLOP/s; %s weights, %s activations\n",
        cpu_model().c_str(), (long long)threads, bws.median(), bws.gbs.size(), bws.min(), bws.max(), isa.c_str(), peak,
        dtype_name(wdtype), dtype.c_str());
    if (compare_torch) {
        auto str = [&](const char* k) {
            return torch_info.contains(k) && torch_info[k].is_string() ? torch_info[k].get<std::string>() : "?";
        };
        std::printf(
            "against torch %s F.linear (bf16 x, bf16 w; oneDNN %s, %s, implementation %s), same threads, shapes, "
            "reps and working set; ratio = our GFLOP/s / torch's (> 1: kimi.cpp faster)\n",
            str("version").c_str(), str("onednn_version").c_str(), str("onednn_isa").c_str(),
            str("onednn_impl").c_str());
    }
    if (!json_path.empty()) {
        std::ofstream f(json_path);
        if (!f) throw Error(json_path + ": cannot create");
        J j{{"benchmark", "matmul"},
            {"cpu", cpu_model()},
            {"matmul_units", cpu::matmul_units()},
            {"threads", threads},
            {"activation_dtype", dtype},
            {"weight_dtype", dtype_name(wdtype)},
            {"read_bandwidth_gbs", bws.median()},
            {"read_bandwidth_samples_gbs", bws.gbs},
            {"peak_gflops", peak},
            {"peak_isa", isa},
            {"rows", rows}};
        if (compare_torch) j["torch"] = torch_info;
        f << j.dump(2) << "\n";
    }
    return 0;
}

}   // namespace kimi::app
