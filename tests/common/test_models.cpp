// Test helpers (see test_models.h).
#include "test_models.h"

#include <stdlib.h>

#include <filesystem>
#include <mutex>
#include <vector>

#include "core/rng.h"
#include "checkpoint_make/random_checkpoint.h"

namespace kimi::test {

namespace {
std::mutex g_dirs_mu;
std::vector<std::string>& made_dirs() {
    static std::vector<std::string> dirs;
    return dirs;
}
void remove_made_dirs() {
    std::error_code ec;
    for (const auto& d : made_dirs()) std::filesystem::remove_all(d, ec);
}
}   // namespace

std::string temp_dir(const std::string& tag) {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/kimi-" + tag + "-XXXXXX";
    if (!mkdtemp(templ.data())) throw Error("mkdtemp failed");
    std::lock_guard<std::mutex> lk(g_dirs_mu);
    if (made_dirs().empty()) std::atexit(remove_made_dirs);
    made_dirs().push_back(templ);
    return templ;
}

std::string make_model(const std::string& preset, const std::vector<std::string>& sets, uint64_t seed,
                       bool mxfp4_experts) {
    const std::string dir = temp_dir("model");
    nlohmann::ordered_json c = model_preset(preset);
    for (const auto& s : sets) apply_config_override(c, s);
    write_random_checkpoint(dir, c, seed, nullptr, 0, mxfp4_experts);
    return dir;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
    Rng r(seed);
    std::vector<int32_t> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(int32_t(r.below(uint64_t(vocab))));
    return out;
}

}   // namespace kimi::test
