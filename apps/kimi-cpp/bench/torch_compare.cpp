// Runs the PyTorch baselines as child processes (fork + execv, stdout/stderr shared so their
// progress shows), reads the JSON they write, and joins bench model's rows to the engine's.
#include "torch_compare.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace kimi::app {

namespace {
using J = nlohmann::ordered_json;

std::string join(const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

int run_child(const std::vector<std::string>& argv, const std::string& what) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const char* name = what.c_str();
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw Error("--compare-torch: fork failed");
    if (pid == 0) {
        execv(args[0], args.data());
        std::fprintf(stderr, "%s: cannot run %s\n", name, args[0]);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The child's output file, removed when it goes out of scope (on errors as well).
struct TempJson {
    std::filesystem::path path;
    TempJson() {
        static std::atomic<int> seq{0};
        path = std::filesystem::temp_directory_path() /
            ("kimi-torch-" + std::to_string(getpid()) + "-" + std::to_string(seq++) + ".json");
    }
    ~TempJson() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
    TempJson(const TempJson&) = delete;
    TempJson& operator=(const TempJson&) = delete;
};
}   // namespace

std::string default_torch_script() { return KIMI_SOURCE_DIR "/tools/torch_baseline/kimi_torch.py"; }
std::string default_torch_matmul_script() { return KIMI_SOURCE_DIR "/tools/torch_baseline/torch_matmul.py"; }

void check_torch_script(const std::string& python, const std::string& script) {
    if (!std::filesystem::exists(python)) throw Error("--compare-torch needs " + python + " (Debian python3-torch)");
    if (!std::filesystem::exists(script)) throw Error("--compare-torch: no baseline script at " + script);
}

J run_torch_script(const std::string& python, const std::string& script, std::vector<std::string> args,
                   const std::string& what, bool quiet) {
    check_torch_script(python, script);
    const TempJson out;
    args.insert(args.begin(), {python, script});
    args.insert(args.end(), {"--json", out.path.string()});
    if (quiet) args.push_back("--quiet");
    if (!quiet) std::fprintf(stderr, "%s: running the PyTorch baseline (%s)\n", what.c_str(), script.c_str());
    const int rc = run_child(args, what);
    if (rc != 0) throw Error("--compare-torch: the PyTorch baseline failed (exit " + std::to_string(rc) + ")");
    std::ifstream f(out.path);
    if (!f) throw Error("--compare-torch: the PyTorch baseline wrote no " + out.path.string());
    try {
        return J::parse(f);
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("--compare-torch: unreadable baseline output: ") + e.what());
    }
}

J run_torch_baseline(const TorchCompareOptions& o) {
    const J j =
        run_torch_script(o.python, o.script,
                         {"--model", o.model_dir, "--prompt-lens", join(o.prompt_lens), "--batches", join(o.batches),
                          "--contexts", join(o.contexts), "--reps", std::to_string(o.reps), "--decode-steps",
                          std::to_string(o.decode_steps), "--threads", std::to_string(o.threads)},
                         "bench model", o.quiet);
    if (!j.contains("prefill") || !j.contains("decode"))
        throw Error("--compare-torch: baseline output lacks prefill/decode rows");
    return j;
}

J run_torch_matmul(const TorchMatmulOptions& o) {
    std::string shapes;
    for (const std::string& s : o.shapes) shapes += (shapes.empty() ? "" : ",") + s;
    const J j =
        run_torch_script(o.python, o.script,
                         {"--shapes", shapes, "--tokens", join(o.tokens), "--reps", std::to_string(o.reps),
                          "--working-set-mb", std::to_string(o.working_set_mb), "--threads", std::to_string(o.threads)},
                         "bench matmul", o.quiet);
    if (!j.contains("rows") || !j["rows"].is_array() || j["rows"].size() != o.shapes.size() * o.tokens.size())
        throw Error("--compare-torch: baseline output lacks rows for every shape and token count");
    return j;
}

void join_torch_rows(J& rows, const J& torch_rows) {
    for (J& row : rows) {
        for (const J& t : torch_rows) {
            if (t.value("test", "") != row["test"]) continue;
            const double ours = row["tokens_per_s"]["median"].get<double>();
            const double theirs = t["tokens_per_s"]["median"].get<double>();
            row["torch_tokens_per_s"] = t["tokens_per_s"];
            row["speedup_vs_torch"] = theirs > 0 ? ours / theirs : 0.0;
            std::printf("| %s | %.2f | %.2f | %.2fx |\n", row["test"].get<std::string>().c_str(), ours, theirs,
                        row["speedup_vs_torch"].get<double>());
        }
    }
}

}   // namespace kimi::app
