// `kimi-cpp quantize --model IN --out OUT --format mxfp4 [--targets experts|experts+shared|all-linear]
// [--threads N] [--max-shard-size GB] [--quiet]`: an MXFP4 copy of a checkpoint
// (checkpoint_make/quantize_checkpoint.h), with a progress bar and a summary line.
#include <algorithm>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "checkpoint_make/quantize_checkpoint.h"
#include "progress.h"

namespace kimi::app {

int cmd_quantize(int argc, char** argv) {
    ArgParser args("quantize", argc, argv);
    const std::string in_dir = args.required("--model");
    const std::string out_dir = args.required("--out");
    args.choice("--format", "mxfp4", {"mxfp4"});
    QuantizeOptions opts;
    opts.targets = args.choice("--targets", "experts", {"experts", "experts+shared", "all-linear"});
    const int64_t threads = args.integer("--threads", ThreadPool::default_threads(), 1, 1024);
    const double shard_gb = args.real("--max-shard-size", 5.0);
    const bool quiet = args.flag("--quiet");
    args.done();
    if (!(shard_gb > 0.0)) throw Error("quantize: --max-shard-size must be > 0 (GB)");
    opts.threads = int(threads);
    opts.max_shard_bytes = uint64_t(shard_gb * 1e9);
    Progress bar("quantize", quiet);
    opts.progress = [&](uint64_t done, uint64_t total) { bar.update(double(done), double(total), "bytes"); };
    const QuantizeReport plan = quantize_checkpoint(in_dir, out_dir, opts);
    bar.finish();
    if (!plan.notices.empty()) {   // one line: the count and the first few
        std::string list;
        for (size_t i = 0; i < std::min<size_t>(3, plan.notices.size()); ++i) list += (i ? "; " : "") + plan.notices[i];
        std::fprintf(
            stderr, "quantize: notice: %zu targeted linears stay as stored (listed in ignore): %s%s\n",
            plan.notices.size(), list.c_str(),
            plan.notices.size() > 3 ? ("; and " + std::to_string(plan.notices.size() - 3) + " more").c_str() : "");
    }

    std::fprintf(stderr, "quantize: %zu linears to MXFP4 (%s), %zu left as stored; %.2f GiB -> %.2f GiB; wrote %s\n",
                 plan.quantized.size(), opts.targets.c_str(), plan.ignored.size(), double(plan.bytes_in) / 1073741824.0,
                 double(plan.bytes_out) / 1073741824.0, out_dir.c_str());
    return 0;
}

}   // namespace kimi::app
