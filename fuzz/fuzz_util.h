// Helpers shared by the libFuzzer targets: a private scratch folder (mkdtemp under $TMPDIR,
// removed at exit; run.py points TMPDIR at a folder of its own, so a crashing run leaves
// nothing behind either), the synthetic tokenizers the unit tests use (written there once,
// loaded, and the files removed at once), a cursor over the fuzz input, `fuzz_assert` for the
// properties a target checks beyond "no crash" (it aborts, which libFuzzer records), and
// note_refusal (KIMI_FUZZ_VERBOSE=1 prints why an input was refused cleanly).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "tokenizer/synthetic.h"
#include "tokenizer/tokenizer.h"

namespace kimi::fuzz {

// A property of the code under test does not hold: print it and abort (a crash to libFuzzer).
[[noreturn]] inline void fail(const char* what, const std::string& detail = {}) {
    std::fprintf(stderr, "fuzz property violated: %s\n%s\n", what, detail.c_str());
    std::abort();
}
#define fuzz_assert(cond, ...)                                             \
    do {                                                                   \
        if (!(cond)) ::kimi::fuzz::fail(#cond __VA_OPT__(, ) __VA_ARGS__); \
    } while (0)

// KIMI_FUZZ_VERBOSE=1: print why an input was refused (to check what a seed reaches).
inline void note_refusal(const char* what) {
    static const bool on = std::getenv("KIMI_FUZZ_VERBOSE") != nullptr;
    if (on) std::fprintf(stderr, "refused: %s\n", what);
}

// This process's scratch folder (created on first use, removed when the process exits).
inline const std::string& scratch_dir() {
    static const std::string dir = [] {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/kimi-fuzz-XXXXXX";
        if (!::mkdtemp(tmpl.data())) fail("mkdtemp", tmpl);
        static const std::string removed_at_exit = tmpl;
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(removed_at_exit, ec);
        });
        return tmpl;
    }();
    return dir;
}

// A synthetic tokenizer of n_base ranks in the given special layout (as the unit tests build one).
inline tok::Tokenizer make_synthetic_tokenizer(int32_t n_base, uint64_t seed, tok::SpecialLayout layout) {
    const std::string dir = scratch_dir() + "/tok-" + std::to_string(n_base) + "-" + std::to_string(int(layout));
    tok::write_synthetic_tokenizer(dir, n_base, seed, layout);
    tok::Tokenizer t = tok::Tokenizer::load(dir);
    std::filesystem::remove_all(dir);
    return t;
}

inline const tok::Tokenizer& kimi_linear_tokenizer() {
    static const tok::Tokenizer t = make_synthetic_tokenizer(1024, 7, tok::SpecialLayout::kKimiLinear);
    return t;
}

inline const tok::Tokenizer& k3_tokenizer() {
    static const tok::Tokenizer t = make_synthetic_tokenizer(1024, 3, tok::SpecialLayout::kKimiK3);
    return t;
}

// Reads the fuzz input front to back: small choices first, the rest as text.
class Input {
public:
    Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    uint8_t byte() {   // 0 once the input is used up
        if (n_ == 0) return 0;
        --n_;
        return *p_++;
    }
    std::string_view take(size_t k) {
        k = k < n_ ? k : n_;
        std::string_view s(reinterpret_cast<const char*>(p_), k);
        p_ += k, n_ -= k;
        return s;
    }
    std::string_view rest() { return take(n_); }

private:
    const uint8_t* p_;
    size_t n_;
};

}   // namespace kimi::fuzz
