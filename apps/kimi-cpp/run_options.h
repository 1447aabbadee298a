// Engine flags shared by every command that runs the model:
// --activation-dtype auto|f32|bf16, --threads N, --attn-output direct|copy.
// auto (the default, as vLLM's dtype=auto): bf16 activations when the checkpoint's weights are
// BF16 and the CPU has a vector path (AVX2 or AVX-512), f32 otherwise — resolved once the model
// is loaded (resolve_precision).
#pragma once
#include "args.h"
#include "backend/exec.h"
#include "model/kimi_model.h"

namespace kimi::app {

struct RunOptions {
    Precision precision = Precision::kF32;
    bool precision_auto = true;
    AttnOutputMode attn_output = AttnOutputMode::kDirect;
    int threads = 1;
};

RunOptions parse_run_options(ArgParser& args);
// The activation precision for this model: the flag's, or auto's choice.
Precision resolve_precision(bool precision_auto, Precision flag, const KimiModel& model);
Exec make_exec(const RunOptions& r, ThreadPool& pool, Arena& arena);

}   // namespace kimi::app
