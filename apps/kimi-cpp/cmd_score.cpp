// `kimi-cpp score`: run one sequence and write the logits of every position as
// little-endian float32 [T, vocab]: --tokens ids, or --request a whole chat request (K3 images
// included: rendered, encoded and placed as the server does; --tokens-out writes its ids). The
// feeding flags change how the sequence is cut into forward steps and what shares them; by
// design none of them changes a single bit.
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "model/kimi_model.h"
#include "runtime/sequence_driver.h"
#include "chat/chat_format.h"
#include "media_options.h"
#include "run_options.h"
#include "text_io.h"

namespace kimi::app {

namespace {

// A chat request (OpenAI body, images included) → its prompt ids and the rows its image tokens
// take (each image encoded by the tower at the run's precision and thread count).
std::vector<int32_t> render_request(const KimiModel& model, const std::string& model_dir, const std::string& path,
                                    const MediaOptions& media, const RunOptions& run, InputRows& rows) {
    nlohmann::ordered_json body;
    try {
        body = nlohmann::ordered_json::parse(read_all(path));
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": invalid JSON: " + e.what());
    }
    if (!body.is_object()) throw Error(path + ": a chat request must be a JSON object");
    const auto tok = load_tokenizer_for(model_dir, model.config(), true);
    chat::ChatRequest r = chat::chat_request_from_body(body);
    r.allow_special_in_content = false;
    const auto loader = make_media_loader(model, model_dir, media);
    std::vector<image::PromptImage> images;
    r.images = loader->resolver(images);
    const std::vector<int32_t> ids = chat::chat_format_for(*tok)->render(r).ids;
    if (images.empty()) return ids;
    VisionEncoder encoder(model, run.precision, run.threads, 0);
    for (const MediaSpan& m : encoder.encode_prompt(ids, images)) {
        for (int64_t i = 0; i < m.n; ++i) rows.positions.push_back(int32_t(m.offset + i));
        rows.values.insert(rows.values.end(), m.embeds->begin(), m.embeds->end());
    }
    return ids;
}

}   // namespace

int cmd_score(int argc, char** argv) {
    ArgParser args("score", argc, argv);
    const std::string model_dir = args.required("--model");
    const std::optional<std::string> tokens_arg = args.opt("--tokens"), request = args.opt("--request");
    std::vector<int32_t> tokens;
    if (tokens_arg) tokens = parse_int_list("score --tokens", *tokens_arg);
    const std::string tokens_out = args.str("--tokens-out", "");
    const std::string embeds_out = args.str("--embeds-out", "");   // the image rows, f32 [Σ N, D]
    const MediaOptions media = parse_media_options(args);
    const std::string out_path = args.required("--out");
    RunOptions run = parse_run_options(args);
    DriveOptions drive;
    drive.prefill_chunk = args.integer("--prefill-chunk", 0);
    drive.decode_from = args.integer("--decode-from", -1);
    drive.n_fillers = args.integer("--batch-filler", 0, 0, 256);
    const Shard shard = parse_shard_options(args);
    const bool check_weights = !args.flag("--skip-weight-check");
    args.done();
    if (tokens_arg.has_value() == request.has_value()) throw Error("score: give one of --tokens and --request");
    if (drive.prefill_chunk < 0) throw Error("score: --prefill-chunk must be >= 1");
    if (drive.decode_from < -1 || (tokens_arg && drive.decode_from > int64_t(tokens.size())))
        throw Error("score: --decode-from must be in [0, number of tokens]");
    if (tokens_arg && tokens.empty()) throw Error("score: --tokens is empty");

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
    InputRows rows;
    if (request) tokens = render_request(*model, model_dir, *request, media, run, rows);
    if (tokens.empty()) throw Error("score: the request renders to no tokens");
    if (drive.decode_from > int64_t(tokens.size()))
        throw Error("score: --decode-from must be in [0, number of tokens]");
    const std::vector<float> logits = score_sequence(*model, ex, tokens, drive, rows);
    if (shard.rank != 0) return 0;

    if (!embeds_out.empty()) {
        std::ofstream e(embeds_out, std::ios::binary);
        e.write(reinterpret_cast<const char*>(rows.values.data()), std::streamsize(rows.values.size() * sizeof(float)));
        if (!e) throw Error(embeds_out + ": write failed");
    }
    if (!tokens_out.empty()) {
        std::ofstream t(tokens_out);
        t << nlohmann::json(tokens).dump() << "\n";
        if (!t) throw Error(tokens_out + ": write failed");
    }
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
