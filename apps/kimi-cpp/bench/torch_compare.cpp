// Runs the PyTorch eager baseline as a child process (fork + execv, stdout/stderr shared so
// its progress shows) and joins its result rows to the engine's.
#include "torch_compare.h"

#include <sys/wait.h>
#include <unistd.h>

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

int run_child(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw Error("--compare-torch: fork failed");
    if (pid == 0) {
        execv(args[0], args.data());
        std::fprintf(stderr, "bench model: cannot run %s\n", args[0]);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
}   // namespace

std::string default_torch_script() { return KIMI_SOURCE_DIR "/tools/torch_baseline/kimi_torch.py"; }

void check_torch_baseline(const TorchCompareOptions& o) {
    if (!std::filesystem::exists(o.python))
        throw Error("--compare-torch needs " + o.python + " (Debian python3-torch)");
    if (!std::filesystem::exists(o.script)) throw Error("--compare-torch: no baseline script at " + o.script);
}

J run_torch_baseline(const TorchCompareOptions& o) {
    check_torch_baseline(o);
    const auto out = std::filesystem::temp_directory_path() / ("kimi-torch-" + std::to_string(getpid()) + ".json");
    std::vector<std::string> argv = {o.python,         o.script,
                                     "--model",        o.model_dir,
                                     "--prompt-lens",  join(o.prompt_lens),
                                     "--batches",      join(o.batches),
                                     "--contexts",     join(o.contexts),
                                     "--reps",         std::to_string(o.reps),
                                     "--decode-steps", std::to_string(o.decode_steps),
                                     "--threads",      std::to_string(o.threads),
                                     "--json",         out.string()};
    if (o.quiet) argv.push_back("--quiet");
    if (!o.quiet) std::fprintf(stderr, "bench model: running the PyTorch eager baseline (%s)\n", o.script.c_str());
    const int rc = run_child(argv);
    if (rc != 0) throw Error("--compare-torch: the PyTorch baseline failed (exit " + std::to_string(rc) + ")");
    std::ifstream f(out);
    J j;
    try {
        j = J::parse(f);
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("--compare-torch: unreadable baseline output: ") + e.what());
    }
    std::filesystem::remove(out);
    if (!j.contains("prefill") || !j.contains("decode"))
        throw Error("--compare-torch: baseline output lacks prefill/decode rows");
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
