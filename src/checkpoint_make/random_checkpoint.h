// Random Kimi Linear and Kimi-K3 checkpoints in exactly the published Hugging Face layouts
// (config.json + safetensors, sharded with an index when asked; each model's published
// dtypes; for K3 the nested text_config, the language_model. prefix, and the vision tower and
// projector with preprocessor_config.json), for tests, the embedded default model and
// benchmarks. Deterministic for a seed: every tensor is drawn from its own stream keyed by
// (seed, name, chunk), independent of threads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi {

// Preset config.json objects: "tiny", "small", "bench" (Kimi Linear), "k3-tiny", "k3-small",
// "k3-bench" (Kimi-K3). Throws kimi::Error for other names.
nlohmann::ordered_json model_preset(const std::string& name);
std::vector<std::string> model_preset_names();
// The shard size a preset is written with by default (0: one model.safetensors).
uint64_t preset_shard_bytes(const std::string& name);

// Applies `key=value` (dotted key into nested objects, e.g. text_config.attn_res_block_size;
// value parsed as JSON, else a string).
void apply_config_override(nlohmann::ordered_json& config, const std::string& assignment);

// Writes config.json and the safetensors (shards of at most max_shard_bytes + index when
// non-zero) into `dir` (created if missing). The config is validated first.
// progress(bytes_done, bytes_total) is called as data is written.
// mxfp4_experts: the published Kimi-K3 MXFP4 form — the published quantization_config block
// (published_k3_quant_config) in text_config (or at the top level of a Kimi Linear config),
// every routed expert weight as weight_packed + weight_scale (exactly what `kimi-cpp quantize
// --targets experts` makes of the same checkpoint without the flag), the rest as without it.
void write_random_checkpoint(const std::string& dir, const nlohmann::ordered_json& config, uint64_t seed,
                             const std::function<void(uint64_t, uint64_t)>& progress, uint64_t max_shard_bytes = 0,
                             bool mxfp4_experts = false);

}   // namespace kimi
