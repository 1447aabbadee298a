// `kimi-cpp score`: run one sequence and write the logits of every position as
// little-endian float32 [T, vocab]. The feeding flags change how the sequence is cut into
// forward steps and what shares them; by design none of them changes a single bit.
#include <cstdio>
#include <memory>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "model/kimi_model.h"
#include "bench/sequence_driver.h"
#include "run_options.h"

namespace kimi::app {

int cmd_score(int argc, char** argv) {
    ArgParser args("score", argc, argv);
    const std::string model_dir = args.required("--model");
    const std::vector<int32_t> tokens = parse_int_list("score --tokens", args.required("--tokens"));
    const std::string out_path = args.required("--out");
    RunOptions run = parse_run_options(args);
    DriveOptions drive;
    drive.prefill_chunk = args.integer("--prefill-chunk", 0);
    drive.decode_from = args.integer("--decode-from", -1);
    drive.n_fillers = args.integer("--batch-filler", 0);
    const Shard shard = parse_shard_options(args);
    const bool check_weights = !args.flag("--skip-weight-check");
    args.done();
    if (drive.prefill_chunk < 0) throw Error("score: --prefill-chunk must be >= 1");
    if (drive.decode_from < -1 || drive.decode_from > int64_t(tokens.size()))
        throw Error("score: --decode-from must be in [0, number of tokens]");
    if (drive.n_fillers < 0 || drive.n_fillers > 256) throw Error("score: --batch-filler must be in [0, 256]");
    if (tokens.empty()) throw Error("score: --tokens is empty");

    // Split (mpirun): every rank drives the same steps on its part; rank 0 writes the logits.
    auto model = KimiModel::load(model_dir, {}, WeightMemory::kAuto, shard, check_weights);
    run.precision = resolve_precision(run.precision_auto, run.precision, *model);
    note_skipped_tensors(*model, shard.rank != 0);
    for (int32_t id : tokens)
        if (id < 0 || id >= model->config().vocab_size)
            throw Error("score: token id " + std::to_string(id) + " is out of range [0, " +
                        std::to_string(model->config().vocab_size) + ")");
    ThreadPool pool(run.threads);
    Arena arena, layer_arena;
    Exec ex = make_exec(run, pool, arena);
    ex.layer_arena = &layer_arena;
    const std::vector<float> logits = score_sequence(*model, ex, tokens, drive);
    if (shard.rank != 0) return 0;

    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(out_path.c_str(), "wb"), std::fclose);
    if (!f) throw Error(out_path + ": cannot create");
    static_assert(sizeof(float) == 4);
    if (std::fwrite(logits.data(), sizeof(float), logits.size(), f.get()) != logits.size())
        throw Error(out_path + ": write failed");
    std::fprintf(stderr, "score: %zu positions x %lld logits -> %s (%s, %d threads, attn-output %s)\n", tokens.size(),
                 (long long)model->config().vocab_size, out_path.c_str(),
                 run.precision == Precision::kF32 ? "f32" : "bf16", pool.size(),
                 run.attn_output == AttnOutputMode::kDirect ? "direct" : "copy");
    return 0;
}

}   // namespace kimi::app
