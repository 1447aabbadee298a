// QuantConfig: a checkpoint's `quantization_config` (compressed-tensors, docs/mxfp4.md#format), of
// which the engine reads one scheme: `mxfp4-pack-quantized` — FP4 E2M1 weights, one E8M0 scale
// per 32, no global scale, weights only. Which linears are quantized follows compressed-tensors'
// matching: a module is quantized when a `targets` entry matches it and no `ignore` entry does;
// an entry matches by exact module name, by `re:` regex (Python re.match: anchored at the start
// of the name, not at its end), or by class name ("Linear": every linear layer).
// Anything else (nvfp4, int4/int8 pack-quantized, fp8, other bit widths or group sizes,
// activation or KV-cache quantization) is a one-line error naming it.
// The config is only a cross-check: the checkpoint's files decide how each weight is stored
// (WeightStore::linear), since published checkpoints store modules the config would target
// (the router, K3's latent projections and AttnRes vectors: not nn.Linear in the source model)
// as plain BF16.
#pragma once
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kimi {

struct ModuleMatcher {
    std::string text;                       // as written in the config
    std::shared_ptr<const std::regex> re;   // `re:` entries
    bool is_class = false;                  // "Linear": any weight-holding module read as a linear
    bool matches(const std::string& module) const;
};

struct QuantConfig {
    bool mxfp4 = false;   // false: nothing is quantized
    std::string where;    // names the block in messages ("config.json: text_config.quantization_config")
    std::vector<ModuleMatcher> targets, ignore;
    // Whether the config quantizes `module` (full HF module name, e.g.
    // "language_model.model.layers.0.block_sparse_moe.experts.3.w1"): a target matches, no ignore entry does.
    bool quantizes(const std::string& module) const;
    // Why it does not ("" when it does), for messages: "it has no quantization_config",
    // "none of the targets of WHERE matches it", "WHERE ignores it (entry 're:.*self_attn.*')".
    std::string why_not(const std::string& module) const;
};

// `q` is the quantization_config object; `where` names it in errors ("config.json: text_config.").
QuantConfig parse_quant_config(const nlohmann::json& q, const std::string& where);

// The quantization_config block of the published Kimi-K3 MXFP4 checkpoint (less its observer
// fields): one mxfp4-pack-quantized group targeting "Linear", ignoring attention, shared
// experts, dense MLPs, lm_head, the vision tower and the projector. Written by
// `make-model --mxfp4-experts` and by `quantize --targets experts` on a K3 checkpoint.
nlohmann::ordered_json published_k3_quant_config();

}   // namespace kimi
