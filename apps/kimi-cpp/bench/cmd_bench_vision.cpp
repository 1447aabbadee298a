// `kimi-cpp bench vision`: the K3 vision tower's encode time for one image of a given size
// (a synthetic photo-like RGB image, preprocessed as a real one): patches, merged tokens,
// encode ms (min / median / max over --reps, the encoder cache off), the tower's and
// projector's FLOPs (matrix products + attention), GFLOP/s and the % of the bf16 (or f32)
// multiply-add peak measured in the same run. JSON with --json.
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backend/cpu/matmul_kernel.h"
#include "args.h"
#include "bench/stats.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "image/image_input.h"
#include "machine_limits.h"
#include "progress.h"
#include "run_options.h"
#include "runtime/vision_encoder.h"

namespace kimi::app {

namespace {

using J = nlohmann::ordered_json;

// A w×h RGB image with smooth gradients and a little texture (nothing the tower's speed depends on).
image::DecodedImage synthetic_image(int32_t w, int32_t h) {
    image::DecodedImage img;
    img.width = w;
    img.height = h;
    img.mode = image::PixelMode::kRGB;
    img.format = "synthetic";
    img.pixels.resize(size_t(w) * size_t(h) * 3);
    for (int32_t y = 0; y < h; ++y)
        for (int32_t x = 0; x < w; ++x) {
            uint8_t* p = img.pixels.data() + (size_t(y) * size_t(w) + size_t(x)) * 3;
            p[0] = uint8_t(x * 255 / std::max(1, w - 1));
            p[1] = uint8_t(y * 255 / std::max(1, h - 1));
            p[2] = uint8_t((x * 7 + y * 13) & 255);
        }
    return img;
}

// Multiply-adds ×2 of one image through the tower and the projector.
struct Flops {
    double gemm = 0, attention = 0;
};
Flops encode_flops(const VisionConfig& v, int64_t n_patches) {
    const double n = double(n_patches), d = double(v.hidden), q = double(v.qkv_dim), i = double(v.intermediate);
    Flops f;
    f.gemm = 2 * n * double(v.patch_dim()) * d;                               // patch embedding
    f.gemm += double(v.n_layers) * 2 * n * (d * 3 * q + q * d + 2 * d * i);   // wqkv, wo, fc0, fc1
    const double cells = n / double(v.merge * v.merge), md = double(v.merged_dim());
    f.gemm += 2 * cells * md * (md + double(v.text_hidden));   // projector
    f.attention = double(v.n_layers) * 4 * n * n * q;          // scores and values
    return f;
}

}   // namespace

int cmd_bench_vision(int argc, char** argv) {
    ArgParser args("bench vision", argc, argv);
    const std::string model_dir = args.required("--model");
    const int64_t width = args.integer("--width", 1024), height = args.integer("--height", 1024);
    const int64_t reps = args.integer("--reps", 3, 1, 1000);
    const std::string json_path = args.str("--json", "");
    const bool quiet = args.flag("--quiet");
    RunOptions run = parse_run_options(args);
    args.done();
    if (width < 1 || height < 1 || width > 16384 || height > 16384)
        throw Error("bench vision: --width and --height must be in [1, 16384]");

    auto model = load_model_with_progress(model_dir, quiet, WeightMemory::kAuto, Shard{}, true, true);
    if (!model->has_vision()) throw Error("bench vision: " + model->vision_unavailable_reason());
    run.precision = resolve_precision(run.precision_auto, run.precision, *model);
    const bool bf16 = run.precision == Precision::kBF16;
    const VisionConfig& v = model->config().vision;

    const image::MediaConfig mc = image::load_media_config(model_dir);
    image::PromptImage img;
    img.img = image::prepare_image(synthetic_image(int32_t(width), int32_t(height)), mc);
    img.key = image::image_key(img.img, mc);
    const int64_t n_patches = int64_t(img.img.geom.grid_h) * img.img.geom.grid_w;
    VisionEncoder encoder(*model, run.precision, run.threads, 0);   // no cache: every rep encodes

    ThreadPool pool(run.threads);
    std::string isa;
    const double peak = unit_peak_gflops(bf16, &pool, isa);
    Progress bar("bench vision", quiet);
    std::vector<double> ms;
    for (int64_t r = 0; r <= reps; ++r) {   // rep 0 warms up (arena growth, first touch)
        const auto t0 = std::chrono::steady_clock::now();
        VisionEncoder::Control ctl;
        ctl.progress = [&](int64_t done, int64_t total) {
            bar.update(double(r * total + done), double((reps + 1) * total), "blocks");
        };
        encoder.encode(img, ctl);
        if (r > 0)
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    bar.finish();
    std::sort(ms.begin(), ms.end());
    const double median = bench::percentile(ms, 50);
    const Flops f = encode_flops(v, n_patches);
    const double gflops = (f.gemm + f.attention) / (median * 1e6);
    J out = {{"benchmark", "vision"},
             {"cpu", cpu_model()},
             {"matmul_units", cpu::matmul_units()},
             {"model", model_dir},
             {"threads", run.threads},
             {"precision", bf16 ? "bf16" : "f32"},
             {"tower", {{"blocks", v.n_layers}, {"width", v.hidden}, {"heads", v.n_heads}, {"mlp", v.intermediate}}},
             {"image",
              {{"width", width}, {"height", height}, {"resized", {img.img.geom.new_width, img.img.geom.new_height}}}},
             {"patches", n_patches},
             {"tokens", img.img.geom.n_tokens},
             {"encode_ms", {{"min", ms.front()}, {"median", median}, {"max", ms.back()}}},
             {"gflop", {{"matmul", f.gemm / 1e9}, {"attention", f.attention / 1e9}}},
             {"gflops", gflops},
             {"peak_gflops", peak},
             {"peak_isa", isa},
             {"percent_of_peak", 100.0 * gflops / peak}};
    std::printf("bench vision: %s, %d threads, %s\n", cpu_model().c_str(), run.threads, bf16 ? "bf16" : "f32");
    std::printf("  tower      %lld blocks x %lld wide (%lld heads, MLP %lld)\n", (long long)v.n_layers,
                (long long)v.hidden, (long long)v.n_heads, (long long)v.intermediate);
    std::printf("  image      %lldx%lld -> %dx%d: %lld patches, %lld tokens\n", (long long)width, (long long)height,
                img.img.geom.new_width, img.img.geom.new_height, (long long)n_patches,
                (long long)img.img.geom.n_tokens);
    std::printf("  encode     %.1f ms median (min %.1f, max %.1f, %lld reps)\n", median, ms.front(), ms.back(),
                (long long)reps);
    std::printf(
        "  work       %.1f GFLOP matmul + %.1f GFLOP attention -> %.1f GFLOP/s = %.0f%% of the %s peak "
        "(%.1f GFLOP/s, %s)\n",
        f.gemm / 1e9, f.attention / 1e9, gflops, 100.0 * gflops / peak, bf16 ? "bf16" : "f32", peak, isa.c_str());
    if (!json_path.empty()) {
        std::ofstream j(json_path);
        j << out.dump(2) << "\n";
        if (!j) throw Error(json_path + ": write failed");
    }
    return 0;
}

}   // namespace kimi::app
