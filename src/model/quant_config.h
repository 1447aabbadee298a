// QuantConfig: a checkpoint's `quantization_config` (compressed-tensors, model-spec §A.6), of
// which the engine reads one scheme: `mxfp4-pack-quantized` — FP4 E2M1 weights, one E8M0 scale
// per 32, no global scale, weights only. Which linears are quantized follows compressed-tensors'
// matching: a module is quantized when a `targets` entry matches it and no `ignore` entry does;
// an entry matches by exact module name, by `re:` regex (Python re.match: anchored at the start
// of the name, not at its end), or by class name ("Linear": every linear layer).
// Anything else (nvfp4, int4/int8 pack-quantized, fp8, other bit widths or group sizes,
// activation or KV-cache quantization) is a one-line error naming it.
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
    bool is_class = false;                  // "Linear"
    bool matches(const std::string& module, bool is_linear) const;
};

struct QuantConfig {
    bool mxfp4 = false;                     // false: nothing is quantized
    std::vector<ModuleMatcher> targets, ignore;
    // Whether `module` (full HF module name, e.g.
    // "language_model.model.layers.0.block_sparse_moe.experts.3.w1") is stored as MXFP4.
    // is_linear: the module is a torch.nn.Linear (the MoE router, KimiMoEGate, is not), so
    // class targets such as "Linear" apply to it.
    bool quantizes(const std::string& module, bool is_linear = true) const;
};

// `q` is the quantization_config object; `where` names it in errors ("config.json: text_config.").
QuantConfig parse_quant_config(const nlohmann::json& q, const std::string& where);

}  // namespace kimi
