// The PyTorch eager baseline of `bench model --compare-torch`: runs
// tools/torch_baseline/kimi_torch.py (Debian python3-torch, bf16) over the same matrix in
// the same run, after the engine's own measurements, and joins its rows to ours by name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::app {

struct TorchCompareOptions {
    std::string python = "/usr/bin/python3";
    std::string script;   // kimi_torch.py
    std::string model_dir;
    std::vector<int32_t> prompt_lens, batches, contexts;
    int64_t reps = 3, decode_steps = 8;
    int threads = 1;
    bool quiet = false;
};

std::string default_torch_script();

// Throws kimi::Error when the interpreter or the script is missing (checked before the bench).
void check_torch_baseline(const TorchCompareOptions& o);

// Runs the baseline and returns its JSON; throws kimi::Error with the reason on failure.
nlohmann::ordered_json run_torch_baseline(const TorchCompareOptions& o);

// Adds to each row of `rows` (ours, by "test" name) "torch_tokens_per_s" (median) and
// "speedup_vs_torch" (our median tokens/s over torch's); prints a comparison table.
void join_torch_rows(nlohmann::ordered_json& rows, const nlohmann::ordered_json& torch_rows);

}   // namespace kimi::app
