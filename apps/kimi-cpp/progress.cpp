// Progress implementation: redraws at most 10 times a second.
#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace kimi::app {

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)),
      active_(!quiet && ::isatty(2)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::update(double done, double total, const char* unit) {
    if (!active_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done < total) return;
    last_ = now;
    drawn_ = true;
    const double frac = total > 0 ? done / total : 1.0;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double eta = frac > 0 ? secs * (1 - frac) / frac : 0;
    char bar[31];
    const int fill = int(frac * 30);
    for (int i = 0; i < 30; ++i) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    const bool bytes = std::string(unit) == "bytes";
    if (bytes)
        std::fprintf(stderr, "\r%s [%s] %5.1f%% %.1f/%.1f MiB  %.0fs left ", label_.c_str(), bar, 100 * frac,
                     done / 1048576, total / 1048576, eta);
    else
        std::fprintf(stderr, "\r%s [%s] %5.1f%% %.0f/%.0f %s  %.0fs left ", label_.c_str(), bar, 100 * frac, done,
                     total, unit, eta);
    std::fflush(stderr);
}

void Progress::finish() {
    if (active_ && drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
}

void for_each_parallel(size_t n, size_t concurrency, const std::string& label, bool quiet, const char* unit,
                       const std::function<void(size_t)>& fn) {
    std::atomic<size_t> next{0}, done{0};
    std::mutex mu;
    Progress bar(label, quiet);
    std::vector<std::thread> ts;
    for (size_t w = 0; w < std::min(concurrency, n); ++w)
        ts.emplace_back([&] {
            for (size_t i; (i = next.fetch_add(1)) < n;) {
                fn(i);
                const size_t d = ++done;
                std::lock_guard<std::mutex> lk(mu);
                bar.update(double(d), double(n), unit);
            }
        });
    for (auto& t : ts) t.join();
    bar.finish();
}

}   // namespace kimi::app
