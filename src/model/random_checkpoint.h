// Random Kimi Linear checkpoints in exactly the Hugging Face layout (config.json +
// model.safetensors: BF16 weights, F32 A_log / dt_bias / e_score_correction_bias), for
// tests, the embedded default model and benchmarks. Deterministic for a seed: every tensor
// is drawn from its own stream keyed by (seed, name, chunk), independent of threads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi {

// Preset config.json objects: "tiny", "small", "bench". Throws kimi::Error for other names.
nlohmann::ordered_json model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

// Applies `key=value` (dotted key into nested objects; value parsed as JSON, else a string).
void apply_config_override(nlohmann::ordered_json& config, const std::string& assignment);

// Writes config.json and model.safetensors into `dir` (created if missing). The config is
// validated first. progress(bytes_done, bytes_total) is called as data is written.
void write_random_checkpoint(const std::string& dir, const nlohmann::ordered_json& config, uint64_t seed,
                             const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace kimi
