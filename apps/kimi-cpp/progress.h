// Progress: a one-line progress bar on stderr for long work (load, prefill, benches);
// silent when stderr is not a terminal or when quiet.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace kimi::app {

class Progress {
public:
    Progress(std::string label, bool quiet);
    void update(double done, double total, const char* unit);
    void finish();

private:
    std::string label_;
    bool active_;
    std::chrono::steady_clock::time_point start_, last_;
    bool drawn_ = false;
};

// fn(i) for i in [0, n) on `concurrency` threads, with a progress bar counting `unit`.
void for_each_parallel(size_t n, size_t concurrency, const std::string& label, bool quiet, const char* unit,
                       const std::function<void(size_t)>& fn);

}   // namespace kimi::app
