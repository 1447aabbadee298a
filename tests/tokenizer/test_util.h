// Helpers shared by the tokenizer GoogleTests: temporary directories, small vocabularies,
// a cached synthetic tokenizer.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base64.h"
#include "tokenizer/synthetic.h"
#include "tokenizer/tokenizer.h"

namespace kimi::tok::test {

// This process's scratch folder, removed when the process exits (also after a failed test).
inline std::filesystem::path temp_base() {
    static const std::filesystem::path base = [] {
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(
                std::filesystem::temp_directory_path() / ("kimi-tok-test-" + std::to_string(::getpid())), ec);
        });
        return std::filesystem::temp_directory_path() / ("kimi-tok-test-" + std::to_string(::getpid()));
    }();
    return base;
}

inline std::filesystem::path temp_dir(const std::string& name) {
    const auto dir = temp_base() / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary);
    f << text;
}

// tiktoken.model lines for the 256 single bytes (rank = byte value), then `extra` tokens.
inline std::string byte_vocab(const std::vector<std::string>& extra = {}) {
    std::string s;
    for (int b = 0; b < 256; ++b) s += base64_encode(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
    for (size_t i = 0; i < extra.size(); ++i) s += base64_encode(extra[i]) + " " + std::to_string(256 + i) + "\n";
    return s;
}

// A synthetic Kimi-layout tokenizer (written once per test binary).
inline const Tokenizer& synthetic(int32_t n_base = 8192) {
    static const Tokenizer tok = [&] {
        const auto dir = temp_dir("synthetic-" + std::to_string(n_base));
        write_synthetic_tokenizer(dir.string(), n_base, 7);
        return Tokenizer::load(dir.string());
    }();
    return tok;
}

}   // namespace kimi::tok::test
