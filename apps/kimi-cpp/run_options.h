// Engine flags shared by every command that runs the model:
// --activation-dtype f32|bf16, --threads N, --attn-output direct|copy.
#pragma once
#include "args.h"
#include "backend/exec.h"

namespace kimi::app {

struct RunOptions {
    Precision precision = Precision::kF32;
    AttnOutputMode attn_output = AttnOutputMode::kDirect;
    int threads = 1;
};

RunOptions parse_run_options(ArgParser& args);
Exec make_exec(const RunOptions& r, ThreadPool& pool, Arena& arena);

}  // namespace kimi::app
