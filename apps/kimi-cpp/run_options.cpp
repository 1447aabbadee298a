// RunOptions parsing (see run_options.h).
#include "run_options.h"

#include "backend/cpu/cpu_features.h"
#include "core/error.h"

namespace kimi::app {

RunOptions parse_run_options(ArgParser& args) {
    RunOptions r;
    const std::string dtype = args.choice("--activation-dtype", "auto", {"auto", "f32", "bf16"});
    r.precision_auto = dtype == "auto";
    r.precision = dtype == "bf16" ? Precision::kBF16 : Precision::kF32;
    r.attn_output = args.choice("--attn-output", "direct", {"direct", "copy"}) == "copy" ? AttnOutputMode::kCopy
                                                                                         : AttnOutputMode::kDirect;
    const int64_t t = args.integer("--threads", ThreadPool::default_threads());
    if (t < 1 || t > 1024) throw Error("--threads must be in [1, 1024]");
    r.threads = int(t);
    return r;
}

Precision resolve_precision(bool precision_auto, Precision flag, const KimiModel& model) {
    if (!precision_auto) return flag;
    const cpu::CpuFeatures f = cpu::cpu_features();
    const bool vector_path = f.avx2 || f.avx512f;
    // a GGUF quantized to Q4_K/Q6_K/Q8_0 (its lm_head's type): bf16 activations where the factored
    // bf16 product runs (AVX-512 BF16; docs/gguf.md#types), the exact f32 path elsewhere
    const DType head = model.weights().lm_head.dtype;
    const bool factored =
        cpu::use_avx512_bf16() && (head == DType::kQ4_K || head == DType::kQ6_K || head == DType::kQ8_0);
    return (head == DType::kBF16 && vector_path) || factored ? Precision::kBF16 : Precision::kF32;
}

Exec make_exec(const RunOptions& r, ThreadPool& pool, Arena& arena) {
    Exec ex;
    ex.pool = &pool;
    ex.arena = &arena;
    ex.precision = r.precision;
    ex.attn_output = r.attn_output;
    return ex;
}

}   // namespace kimi::app
