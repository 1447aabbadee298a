// ThreadPool implementation (see thread_pool.h). Worker 0 is the calling thread.
#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

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

namespace {

// The CPU quota of this process's cgroup, in whole CPUs rounded up (cgroup v2 cpu.max, else v1
// cfs_quota_us / cfs_period_us); 0 when there is none.
int cgroup_cpu_limit() {
    auto quota_of = [](const std::string& dir) -> int {
        std::ifstream f(dir + "/cpu.max");
        std::string q, p;
        if (f >> q >> p && q != "max") {
            const double quota = std::atof(q.c_str()), period = std::atof(p.c_str());
            if (quota > 0 && period > 0) return int(std::ceil(quota / period));
        }
        std::ifstream fq(dir + "/cpu.cfs_quota_us"), fp(dir + "/cpu.cfs_period_us");
        double quota = -1, period = 0;
        if (fq >> quota && fp >> period && quota > 0 && period > 0) return int(std::ceil(quota / period));
        return 0;
    };
    std::ifstream cg("/proc/self/cgroup");
    std::string line;
    while (std::getline(cg, line)) {   // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1)
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        const bool v2 = controllers.empty(), v1_cpu = controllers.find("cpu") != std::string::npos;
        if (!v2 && !v1_cpu) continue;
        for (const std::string& dir : {std::string("/sys/fs/cgroup") + (v2 ? "" : "/cpu") + path,
                                       std::string("/sys/fs/cgroup") + (v2 ? "" : "/cpu")})
            if (const int n = quota_of(dir); n > 0) return n;
    }
    return 0;
}

}   // namespace

int ThreadPool::default_threads() {
    // The CPUs this process may run on (taskset, cpusets), counted as physical cores: SMT
    // siblings share a core's units; then at most the cgroup's CPU quota (containers).
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    std::set<std::pair<int, int>> cores;
    for (int c : cpus) {
        const std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
        std::ifstream pkg(topo + "physical_package_id"), core(topo + "core_id");
        int p = 0, k = 0;
        if (!(pkg >> p) || !(core >> k)) {
            cores.clear();   // no topology: count CPUs
            break;
        }
        cores.insert({p, k});
    }
    int n = !cores.empty() ? int(cores.size()) : !cpus.empty() ? int(cpus.size()) : 0;
    if (n == 0) {
        const unsigned hc = std::thread::hardware_concurrency();
        n = hc ? int(hc) : 1;
    }
    if (const int quota = cgroup_cpu_limit(); quota > 0) n = std::min(n, quota);
    return std::max(n, 1);
}

}   // namespace kimi
