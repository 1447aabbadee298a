// ThreadPool implementation (see thread_pool.h). Worker 0 is the calling thread.
#include "core/thread_pool.h"

#include <chrono>
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

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
}
}   // namespace

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
        generation_.fetch_add(1);
    }
    cv_start_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_range(int w) {
    const int64_t begin = n_ * w / n_threads_, end = n_ * (w + 1) / n_threads_;
    if (begin >= end) return;
    try {
        fn_(ctx_, begin, end, w);
    } catch (...) {   // not out of a worker thread (that ends the process): run() rethrows it
        std::lock_guard<std::mutex> lk(error_mu_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);   // published by pending_'s release (worker_main)
    }
}

void ThreadPool::run(int64_t n, TaskFn fn, void* ctx) {
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    pending_.store(n_threads_ - 1);
    generation_.fetch_add(1);   // seq_cst: publishes the task; pairs with sleepers_ below
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lk(mu_);
        cv_start_.notify_all();
    }
    run_range(0);
    for (uint32_t spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < 2048)
            cpu_relax();
        else
            std::this_thread::yield();
    }
    if (failed_.load(std::memory_order_relaxed)) {
        std::exception_ptr error;
        {
            std::lock_guard<std::mutex> lk(error_mu_);
            error.swap(error_);
            failed_.store(false, std::memory_order_relaxed);
        }
        std::rethrow_exception(error);
    }
}

void ThreadPool::worker_main(int w) {
    uint64_t seen = 0;   // generation_ before any task: a late-starting worker still sees the first
    for (;;) {
        // Spin for the next task for a while, then sleep until one comes.
        const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        for (uint32_t i = 1; generation_.load(std::memory_order_acquire) == seen; ++i) {
            // Pause-spin first; then yield, so an oversubscribed core goes to whoever needs it.
            if (i < 2048)
                cpu_relax();
            else
                std::this_thread::yield();
            if ((i & 255) == 0 && std::chrono::steady_clock::now() > spin_until) {
                std::unique_lock<std::mutex> lk(mu_);
                sleepers_.fetch_add(1);
                cv_start_.wait(lk, [&] { return generation_.load() != seen; });
                sleepers_.fetch_sub(1);
                break;
            }
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        const uint64_t before = thread_alloc_count();
        run_range(w);
        worker_allocs_.fetch_add(thread_alloc_count() - before, std::memory_order_relaxed);
        pending_.fetch_sub(1, std::memory_order_release);
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

}   // namespace kimi
