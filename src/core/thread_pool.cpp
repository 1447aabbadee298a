// ThreadPool implementation (see thread_pool.h). Worker 0 is the calling thread.
#include "core/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "core/alloc_counter.h"

namespace kimi {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    workers_.reserve(size_t(n_threads_));
    for (int w = 1; w < n_threads_; ++w) workers_.emplace_back([this, w] { worker_main(w); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
        ++generation_;
    }
    cv_start_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_range(int w) {
    const int64_t begin = n_ * w / n_threads_, end = n_ * (w + 1) / n_threads_;
    if (begin < end) fn_(ctx_, begin, end, w);
}

void ThreadPool::run(int64_t n, TaskFn fn, void* ctx) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        fn_ = fn;
        ctx_ = ctx;
        n_ = n;
        pending_ = n_threads_ - 1;
        ++generation_;
    }
    cv_start_.notify_all();
    run_range(0);
    std::unique_lock<std::mutex> lk(mu_);
    cv_done_.wait(lk, [this] { return pending_ == 0; });
}

void ThreadPool::worker_main(int w) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_start_.wait(lk, [&] { return generation_ != seen; });
            seen = generation_;
            if (stop_) return;
        }
        const uint64_t before = thread_alloc_count();
        run_range(w);
        worker_allocs_.fetch_add(thread_alloc_count() - before, std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lk(mu_);
            --pending_;
        }
        cv_done_.notify_one();
    }
}

int ThreadPool::default_threads() {
    // Count distinct (physical id, core id) pairs; SMT siblings share a core.
    std::ifstream f("/proc/cpuinfo");
    std::set<std::pair<int, int>> cores;
    std::string line;
    int phys = 0;
    while (std::getline(f, line)) {
        if (line.rfind("physical id", 0) == 0) phys = std::stoi(line.substr(line.find(':') + 1));
        if (line.rfind("core id", 0) == 0) cores.insert({phys, std::stoi(line.substr(line.find(':') + 1))});
    }
    if (!cores.empty()) return int(cores.size());
    const unsigned hc = std::thread::hardware_concurrency();
    return hc ? int(hc) : 1;
}

}  // namespace kimi
