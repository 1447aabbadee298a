// RunOptions parsing (see run_options.h).
#include "run_options.h"

#include "core/error.h"

namespace kimi::app {

RunOptions parse_run_options(ArgParser& args) {
    RunOptions r;
    r.precision = args.choice("--activation-dtype", "f32", {"f32", "bf16"}) == "bf16" ? Precision::kBF16 : Precision::kF32;
    r.attn_output = args.choice("--attn-output", "direct", {"direct", "copy"}) == "copy" ? AttnOutputMode::kCopy
                                                                                        : AttnOutputMode::kDirect;
    const int64_t t = args.integer("--threads", ThreadPool::default_threads());
    if (t < 1 || t > 1024) throw Error("--threads must be in [1, 1024]");
    r.threads = int(t);
    return r;
}

Exec make_exec(const RunOptions& r, ThreadPool& pool, Arena& arena) {
    Exec ex;
    ex.pool = &pool;
    ex.arena = &arena;
    ex.precision = r.precision;
    ex.attn_output = r.attn_output;
    return ex;
}

}  // namespace kimi::app
