// Error handling: kimi::Error for anything user input can trigger (bad files, bad configs,
// bad requests) — caught at the CLI/server boundary and turned into a message + exit code
// or a 4xx. KIMI_CHECK is for programmer errors (broken invariants): it aborts with file:line.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace kimi {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
    std::fprintf(stderr, "kimi-cpp: internal check failed at %s:%d: %s %s\n", file, line, cond, msg.c_str());
    std::abort();
}

}   // namespace kimi

#define KIMI_CHECK(cond, msg)                                                \
    do {                                                                     \
        if (!(cond)) ::kimi::check_failed(__FILE__, __LINE__, #cond, (msg)); \
    } while (0)
