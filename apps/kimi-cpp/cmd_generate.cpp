// `kimi-cpp generate`: one completion from a prompt (text or token ids), streamed to the
// terminal as it is produced, or one JSON object with --json (token ids, text, finish
// reason, logprobs, timings). The tokenizer comes from the model directory unless
// --tokenizer says otherwise; with --tokens and no tokenizer the output is token ids only.
// --image FILE (repeatable; K3 with its vision tower) puts an image where the prompt says
// <|kimi_image_placeholder|> (in order), or before the text when it says it nowhere.
// --json-schema FILE | --regex R | --grammar FILE | --choice a,b,c constrain the output
// (structured_options.h).
#include <unistd.h>

#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "local_run.h"
#include "media_options.h"
#include "structured_options.h"

namespace kimi::app {

namespace {
nlohmann::ordered_json logprobs_json(const LocalResult& r) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& e : r.events) {
        if (e.token < 0) continue;
        auto top = nlohmann::ordered_json::array();
        for (const auto& [id, lp] : e.top) top.push_back({{"token", id}, {"logprob", lp}});
        out.push_back({{"token", e.token}, {"logprob", e.logprob}, {"top_logprobs", std::move(top)}});
    }
    return out;
}
}   // namespace

int cmd_generate(int argc, char** argv) {
    ArgParser args("generate", argc, argv);
    const std::string model_dir = args.required("--model");
    const std::string tok_dir = args.str("--tokenizer", model_dir);
    const auto prompt_text = args.opt("--prompt");
    const auto prompt_ids = args.opt("--tokens");
    const std::string special = args.choice("--special", "all", {"all", "none"});
    const bool json = args.flag("--json");
    const bool quiet = args.flag("--quiet");
    const bool step_stats = args.flag("--step-stats");
    const std::vector<std::string> image_paths = args.list("--image");
    const MediaOptions media = parse_media_options(args);
    const EngineOptions engine_opts = parse_engine_options(args);
    SamplingParams defaults;
    defaults.max_tokens = 128;
    SamplingParams params = parse_sampling_options(args, defaults);
    const StructuredOption structured = parse_structured_options(args);
    params.structured = structured.structured;
    args.done();
    if (bool(prompt_text) == bool(prompt_ids)) throw Error("give exactly one of --prompt TEXT or --tokens 1,2,3");

    auto model = load_model_with_progress(model_dir, quiet, engine_opts.weight_memory, engine_opts.shard,
                                          engine_opts.check_weights);
    const std::optional<tok::Tokenizer> tok =
        load_tokenizer_for(tok_dir, model->config(), bool(prompt_text) || bool(params.structured));
    if (!image_paths.empty() && !prompt_text) throw Error("--image needs --prompt TEXT");
    const auto draft = load_draft_model(engine_opts, *model, model_dir, quiet);
    const EngineConfig ec = engine_opts.with_model_precision(*model, draft.get());
    std::optional<LocalImages> local_images;
    std::vector<image::PromptImage> images;
    if (!image_paths.empty()) {
        if (!model->has_vision()) throw Error(model->vision_unavailable_reason());
        local_images.emplace(*model, model_dir, media, ec.precision, ec.threads, quiet);
        for (const std::string& path : image_paths) images.push_back(local_images->load(path));
    }
    std::vector<int32_t> prompt = !prompt_text ? parse_int_list("--tokens", *prompt_ids)
        : images.empty()                       ? tok->encode(*prompt_text, special == "all")
                                               : raw_prompt_with_images(*tok, *prompt_text, special == "all", images);
    if (prompt.empty()) throw Error("the prompt is empty");

    Engine engine(*model, ec, tok ? &*tok : nullptr);
    if (!engine.leads()) {   // another rank of a split model: run rank 0's steps
        engine.follow();
        return 0;
    }
    if (!quiet) std::fprintf(stderr, "%s\n", engine.sizing().describe().c_str());
    if (const std::string w = engine.sizing().length_warning(); !w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
    install_interrupt_handler();
    const bool stream_out = !json;
    auto on_event = [&](const TokenEvent& e) {
        if (!stream_out) return;
        if (tok)
            std::fwrite(e.text.data(), 1, e.text.size(), stdout);
        else if (e.token >= 0)
            std::printf("%d ", e.token);
        std::fflush(stdout);
    };
    const std::vector<MediaSpan> spans = local_images ? local_images->encode(prompt, images) : std::vector<MediaSpan>{};
    const LocalResult r = run_local(engine, std::move(prompt), params, on_event, quiet, json, step_stats, spans);

    if (json) {
        nlohmann::ordered_json j;
        j["prompt_tokens"] = r.prompt_tokens;
        j["cached_tokens"] = r.cached_tokens;
        j["completion_tokens"] = r.tokens.size();
        j["token_ids"] = r.tokens;
        j["text"] = tok ? nlohmann::ordered_json(r.text) : nlohmann::ordered_json(nullptr);
        j["finish_reason"] = finish_reason_name(r.finish);
        if (structured.structured) j["grammar_compile_ms"] = structured.compile_ms;
        if (params.logprobs >= 0) j["logprobs"] = logprobs_json(r);
        j["timings"] = {{"ttft_ms", r.first_ms},
                        {"prefill_ms", r.first_ms},
                        {"decode_ms", r.last_ms - r.first_ms},
                        {"total_ms", r.last_ms},
                        {"prefill_tokens_per_s", r.prefill_tok_per_s()},
                        {"decode_tokens_per_s", r.decode_tok_per_s()}};
        if (ec.speculative.enabled()) {   // vLLM's spec_decode counters for this run
            const SpecDecodeStats& sd = engine.spec_decode_stats();
            j["spec_decode"] = {{"num_drafts", sd.drafts},
                                {"num_draft_tokens", sd.draft_tokens},
                                {"num_accepted_tokens", sd.accepted_tokens},
                                {"num_accepted_tokens_per_pos", sd.accepted_per_pos}};
        }
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    } else {
        std::printf("\n");
        if (!quiet) std::fprintf(stderr, "[%s]\n", timing_line(r).c_str());
    }
    std::fflush(stdout);
    return r.interrupted ? 130 : 0;
}

}   // namespace kimi::app
