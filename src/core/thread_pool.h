// ThreadPool: persistent workers with static, deterministic partitioning. parallel_for(n, f)
// runs f(i) for i in [0, n) with task i always on the same worker for a given thread count;
// ops are written so each output element is computed by exactly one task with the same
// arithmetic, which makes results independent of the thread count. No allocation per call.
// Dispatch is by atomics: workers spin briefly (~0.2 ms) for the next task before sleeping
// on a condition variable, so the many small ops of a decode step don't pay a futex wake
// each, and an idle pool costs nothing.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kimi {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(i) for every i in [0, n); worker w takes the contiguous range
    // [n*w/size, n*(w+1)/size). Blocks until all are done. Not reentrant. An exception thrown
    // by fn (memory running out) is rethrown here once every worker is done with the task.
    template <class Fn>
    void parallel_for(int64_t n, Fn&& fn) {
        parallel_ranges(n, [&fn](int64_t begin, int64_t end, int) {
            for (int64_t i = begin; i < end; ++i) fn(i);
        });
    }

    // Calls fn(begin, end, worker) once per worker with its contiguous range (possibly
    // empty ranges are skipped); `worker` indexes per-thread scratch.
    template <class Fn>
    void parallel_ranges(int64_t n, Fn&& fn) {
        if (n <= 0) return;
        if (n_threads_ == 1 || n == 1) {
            fn(int64_t(0), n, 0);
            return;
        }
        run(
            n, [](void* ctx, int64_t b, int64_t e, int w) { (*static_cast<Fn*>(ctx))(b, e, w); }, &fn);
    }

    // Heap allocations made by the worker threads while running tasks (see alloc_counter.h).
    uint64_t worker_alloc_count() const { return worker_allocs_.load(std::memory_order_relaxed); }

    // physical cores among the CPUs this process may use (sched_getaffinity), at most the cgroup's
    // CPU quota (cpu.max); falls back to hardware_concurrency
    static int default_threads();

private:
    using TaskFn = void (*)(void*, int64_t, int64_t, int);
    void run(int64_t n, TaskFn fn, void* ctx);
    void worker_main(int w);
    void run_range(int w);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_start_;
    std::atomic<uint64_t> generation_{0};   // bumped once per task (and at shutdown)
    std::atomic<int> pending_{0};           // workers still running the current task
    std::atomic<int> sleepers_{0};          // workers blocked on cv_start_
    std::atomic<bool> stop_{false};
    TaskFn fn_ = nullptr;
    void* ctx_ = nullptr;
    int64_t n_ = 0;
    std::atomic<uint64_t> worker_allocs_{0};
    std::atomic<bool> failed_{false};   // error_ is set (read after pending_ reaches 0)
    std::mutex error_mu_;
    std::exception_ptr error_;   // the current task's first exception (under error_mu_)
};

}   // namespace kimi
