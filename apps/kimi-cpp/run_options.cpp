// RunOptions parsing (see run_options.h).
#include "run_options.h"

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"
#include "core/error.h"

namespace kimi::app {

RunOptions parse_run_options(ArgParser& args) {
    RunOptions r;
    const std::string dtype = args.choice("--activation-dtype", "auto", {"auto", "f32", "bf16"});
    r.precision_auto = dtype == "auto";
    r.precision = dtype == "bf16" ? Precision::kBF16 : Precision::kF32;
    r.attn_output = args.choice("--attn-output", "direct", {"direct", "copy"}) == "copy" ? AttnOutputMode::kCopy
                                                                                         : AttnOutputMode::kDirect;
    const int64_t t = args.integer("--threads", ThreadPool::default_threads(), 1, 1024);
    r.threads = int(t);
    return r;
}

Precision resolve_precision(bool precision_auto, Precision flag, const KimiModel& model) {
    if (!precision_auto) return flag;
    const cpu::CpuFeatures f = cpu::cpu_features();
    const bool vector_path = f.avx2 || f.avx512f;
    // a GGUF quantized to a type with a factored bf16 product (judged by its lm_head): bf16
    // activations where that product runs (AVX-512 BF16; docs/gguf.md#types), f32 elsewhere
    const DType head = model.weights().lm_head.dtype;
    const bool factored = cpu::use_avx512_bf16() && cpu::block_type_takes_bf16(head);
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
