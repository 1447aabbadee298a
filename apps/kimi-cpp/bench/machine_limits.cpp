// Machine limit measurements (see machine_limits.h).
#include "machine_limits.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cpu/machine_probe.h"
#include "backend/cpu/matmul_kernel.h"
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
// 4 TDPBF16PS an iteration, ~16 cycles each at the unit's throughput: ~0.05 s at 2.5 GHz.
constexpr int64_t kAmxIters = 2'000'000;
}   // namespace

HugeBuffer::HugeBuffer(size_t bytes) {
    constexpr size_t kHuge = size_t(2) << 20;
    map_len_ = (bytes + kHuge - 1) / kHuge * kHuge + kHuge;   // one huge page of slack for the alignment
    map_ = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map_ == MAP_FAILED) {
        map_ = nullptr;
        throw Error("cannot allocate " + std::to_string(bytes >> 20) + " MiB for a benchmark buffer");
    }
    data_ = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(map_) + kHuge - 1) & ~(kHuge - 1));
    ::madvise(data_, map_len_ - kHuge, MADV_HUGEPAGE);   // advisory, as for the weights
}

HugeBuffer::~HugeBuffer() {
    if (map_) ::munmap(map_, map_len_);
}

// why: the weights live in 2 MiB-aligned anonymous memory advised for huge pages (the
// default `--no-mmap` copy). A probe over malloc'd 4 KiB pages under-reads that memory by up
// to 40 % on a machine whose THP mode is `madvise` (a page walk and a prefetcher stop every
// 4 KiB), which put decode at "112 % of roofline". So the probe reads the same kind of memory.
ProbeBuffer::ProbeBuffer(ThreadPool& pool, int64_t n)
    : mem(size_t(n) * 8), data(reinterpret_cast<uint64_t*>(mem.data())), n_words(n) {
    uint64_t* p = data;
    pool.parallel_ranges(n, [p](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) p[i] = uint64_t(i) * 0x9e3779b97f4a7c15ull;
    });
    read_gbs(*this, &pool);   // untimed: the first pass after the fill read 5-8 GB/s on a 60 GB/s VM
}

double read_gbs(const ProbeBuffer& b, ThreadPool* pool) {
    const uint64_t* p = b.data;
    const double t = seconds_of([&] {
        if (!pool) {
            g_sink += cpu::read_sum(p, b.n_words);
            return;
        }
        pool->parallel_ranges(b.n_words, [p](int64_t s, int64_t e, int) { g_sink += cpu::read_sum(p + s, e - s); });
    });
    return double(b.n_words) * 8 / 1e9 / t;
}

void sample_bandwidth(const ProbeBuffer& b, ThreadPool& pool, int passes, BandwidthSamples& out) {
    for (int r = 0; r < passes; ++r) out.gbs.push_back(read_gbs(b, &pool));
}

double BandwidthSamples::median() const {
    if (gbs.empty()) return 0;
    std::vector<double> v = gbs;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double BandwidthSamples::min() const { return gbs.empty() ? 0 : *std::min_element(gbs.begin(), gbs.end()); }
double BandwidthSamples::max() const { return gbs.empty() ? 0 : *std::max_element(gbs.begin(), gbs.end()); }

namespace {
// GFLOP/s of `one` (a probe loop) on the calling thread, or on every worker of `pool` at once.
template <class Fn>
double run_peak(Fn&& one, ThreadPool* pool, std::string& isa) {
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
}   // namespace

double peak_gflops(bool bf16, ThreadPool* pool, std::string& isa) {
    return run_peak([bf16] { return bf16 ? cpu::fma_bf16_loop(kIters) : cpu::fma_f32_loop(kIters); }, pool, isa);
}

double amx_peak_gflops(ThreadPool* pool, std::string& isa) {
    return run_peak([] { return cpu::amx_bf16_loop(kAmxIters); }, pool, isa);
}

double unit_peak_gflops(bool bf16, ThreadPool* pool, std::string& isa) {
    if (bf16 && cpu::use_amx() && !cpu::amx_tiles_emulated()) return amx_peak_gflops(pool, isa);
    return peak_gflops(bf16, pool, isa);
}

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

}   // namespace kimi::app
