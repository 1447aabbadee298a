// Machine limit measurements (see machine_limits.h).
#include "machine_limits.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cpu/machine_probe.h"
#include "core/error.h"

namespace kimi::app {

namespace {
template <class Fn>
double seconds_of(Fn&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
std::atomic<uint64_t> g_sink{0};   // keeps the probe results alive
constexpr int64_t kIters = 20'000'000;
}   // namespace

ProbeBuffer::ProbeBuffer(ThreadPool& pool, int64_t n)
    : data(static_cast<uint64_t*>(std::aligned_alloc(64, size_t(n) * 8)), &std::free), n_words(n) {
    if (!data) throw Error("cannot allocate " + std::to_string((n * 8) >> 20) + " MiB for the bandwidth probe");
    uint64_t* p = data.get();
    pool.parallel_ranges(n, [p](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) p[i] = uint64_t(i) * 0x9e3779b97f4a7c15ull;
    });
}

double read_gbs(const ProbeBuffer& b, ThreadPool* pool) {
    const uint64_t* p = b.data.get();
    const double t = seconds_of([&] {
        if (!pool) {
            g_sink += cpu::read_sum(p, b.n_words);
            return;
        }
        pool->parallel_ranges(b.n_words, [p](int64_t s, int64_t e, int) { g_sink += cpu::read_sum(p + s, e - s); });
    });
    return double(b.n_words) * 8 / 1e9 / t;
}

double peak_gflops(bool bf16, ThreadPool* pool, std::string& isa) {
    auto one = [bf16] { return bf16 ? cpu::fma_bf16_loop(kIters) : cpu::fma_f32_loop(kIters); };
    cpu::PeakResult r;
    const int n = pool ? pool->size() : 1;
    const double t = seconds_of([&] {
        if (!pool) {
            r = one();
            return;
        }
        pool->parallel_ranges(n, [&](int64_t s, int64_t e, int w) {
            for (int64_t k = s; k < e; ++k) {
                const cpu::PeakResult q = one();
                g_sink += uint64_t(q.sink);
                if (w == 0) r = q;
            }
        });
    });
    isa = r.isa;
    return r.flops * n / t / 1e9;
}

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

}   // namespace kimi::app
