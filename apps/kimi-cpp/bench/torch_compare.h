// The PyTorch baselines of `--compare-torch`, run in the same invocation after the engine's own
// measurements, as a child process on Debian's python3-torch (bf16, the same threads):
// `bench model` runs tools/torch_baseline/kimi_torch.py over the same matrix and joins its rows
// to ours by name; `bench matmul` runs tools/torch_baseline/torch_matmul.py (F.linear) over the
// same shapes and token counts.
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

struct TorchMatmulOptions {
    std::string python = "/usr/bin/python3";
    std::string script;                // torch_matmul.py
    std::vector<std::string> shapes;   // OUTxIN
    std::vector<int32_t> tokens;
    int64_t reps = 5, working_set_mb = 1024;
    int threads = 1;
    bool quiet = false;
};

std::string default_torch_script();          // KIMI_SOURCE_DIR/tools/torch_baseline/kimi_torch.py
std::string default_torch_matmul_script();   // KIMI_SOURCE_DIR/tools/torch_baseline/torch_matmul.py

// Throws kimi::Error when the interpreter or the script is missing (checked before the bench).
void check_torch_script(const std::string& python, const std::string& script);
inline void check_torch_baseline(const TorchCompareOptions& o) { check_torch_script(o.python, o.script); }

// Runs `python script args... --json TMP [--quiet]` as a child (fork + execv, stdout/stderr
// shared so its progress shows) and returns TMP's JSON; TMP is removed on every path. `what`
// names the command in messages ("bench model"). Throws kimi::Error with the reason on failure.
nlohmann::ordered_json run_torch_script(const std::string& python, const std::string& script,
                                        std::vector<std::string> args, const std::string& what, bool quiet);

// Runs the model baseline and returns its JSON; throws kimi::Error with the reason on failure.
nlohmann::ordered_json run_torch_baseline(const TorchCompareOptions& o);

// Runs the matmul baseline; its JSON has "torch" (version, oneDNN ISA) and "rows", one per
// shape and token count: shape, out, in, tokens, copies, ms {min, median, max}, gflops.
nlohmann::ordered_json run_torch_matmul(const TorchMatmulOptions& o);

// Adds to each row of `rows` (ours, by "test" name) "torch_tokens_per_s" (median) and
// "speedup_vs_torch" (our median tokens/s over torch's); prints a comparison table.
void join_torch_rows(nlohmann::ordered_json& rows, const nlohmann::ordered_json& torch_rows);

}   // namespace kimi::app
