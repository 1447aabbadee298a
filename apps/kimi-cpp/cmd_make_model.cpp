// `kimi-cpp make-model`: a random checkpoint in the HF layout from a preset (+ --set
// overrides), with a synthetic tokenizer directory in the Kimi layout next to it;
// --mxfp4-experts writes the routed experts in the published MXFP4 form.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "checkpoint_make/random_checkpoint.h"
#include "progress.h"
#include "tokenizer/synthetic.h"

namespace kimi::app {

int cmd_make_model(int argc, char** argv) {
    ArgParser args("make-model", argc, argv);
    const std::string out = args.required("--out");
    const std::string preset = args.str("--preset", "tiny");
    const int64_t seed = args.integer("--seed", 0);
    const std::vector<std::string> sets = args.list("--set");
    const int64_t shard_mib = args.integer("--max-shard-size", int64_t(preset_shard_bytes(preset) >> 20));
    const bool quiet = args.flag("--quiet");
    const bool mxfp4_experts = args.flag("--mxfp4-experts");
    args.done();

    if (shard_mib < 0) throw Error("make-model: --max-shard-size must be >= 0 (MiB; 0 = one file)");
    nlohmann::ordered_json config = model_preset(preset);
    for (const auto& s : sets) apply_config_override(config, s);
    Progress bar("make-model", quiet);
    write_random_checkpoint(
        out, config, uint64_t(seed),
        [&](uint64_t done, uint64_t total) { bar.update(double(done), double(total), "bytes"); },
        uint64_t(shard_mib) << 20, mxfp4_experts);
    bar.finish();
    const auto& text = config.contains("text_config") ? config["text_config"] : config;
    const int64_t vocab = text["vocab_size"].get<int64_t>();
    if (vocab >= 512) {
        // a K3 checkpoint gets K3's tokenizer layout (its XTML markers), a Kimi Linear one its own
        tok::write_synthetic_tokenizer(
            out, int32_t(vocab - 256), uint64_t(seed),
            config.contains("text_config") ? tok::SpecialLayout::kKimiK3 : tok::SpecialLayout::kKimiLinear);
    } else {
        std::fprintf(stderr,
                     "make-model: vocab_size %lld < 512: no tokenizer written (needs 256 byte tokens + 256 specials)\n",
                     (long long)vocab);
    }
    std::fprintf(stderr, "make-model: wrote %s (preset %s, seed %lld)\n", out.c_str(), preset.c_str(), (long long)seed);
    return 0;
}

}   // namespace kimi::app
