// One measurement each of the machine limits (bench machine repeats them; bench model uses
// them for the roofline): read bandwidth over a buffer, and the multiply-add peak.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"

namespace kimi::app {

// Anonymous memory of `bytes`, 2 MiB-aligned and advised for huge pages: the memory the
// weights are copied into, so what a benchmark reads from it is what a step reads.
class HugeBuffer {
public:
    explicit HugeBuffer(size_t bytes);   // throws kimi::Error when the memory is not there
    ~HugeBuffer();
    HugeBuffer(const HugeBuffer&) = delete;
    HugeBuffer& operator=(const HugeBuffer&) = delete;
    std::byte* data() const { return data_; }

private:
    void* map_ = nullptr;
    size_t map_len_ = 0;
    std::byte* data_ = nullptr;
};

// The bandwidth probe's buffer: n_words 64-bit words of huge-page memory, filled (so its pages
// exist) and read once untimed.
struct ProbeBuffer {
    ProbeBuffer(ThreadPool& pool, int64_t n_words);
    HugeBuffer mem;
    uint64_t* data;
    int64_t n_words;
};

// Read-bandwidth readings taken over a run (interleaved with the rows they serve): the
// median is the figure rooflines use; min and max show how much the machine drifted.
struct BandwidthSamples {
    std::vector<double> gbs;
    double median() const;
    double min() const;
    double max() const;
};

// `passes` streaming reads of the whole buffer on all of `pool`, appended to `out`.
void sample_bandwidth(const ProbeBuffer& b, ThreadPool& pool, int passes, BandwidthSamples& out);

// GB/s of one streaming read of the whole buffer: on the calling thread, or on all of `pool`.
double read_gbs(const ProbeBuffer& b, ThreadPool* pool);

// GFLOP/s of the register-only FMA loop (f32, or bf16 widened) on one thread or on every
// worker of `pool` at once; `isa` receives the instruction set used.
double peak_gflops(bool bf16, ThreadPool* pool, std::string& isa);

// The same for the AMX-BF16 tile loop (cpu::amx_bf16_loop); only when cpu::amx_support().usable.
double amx_peak_gflops(ThreadPool* pool, std::string& isa);

// The peak of the unit the engine's matrix products run on, for "% of peak": the tile loop
// where the bf16 products run on real AMX tiles (cpu::use_amx), else peak_gflops.
double unit_peak_gflops(bool bf16, ThreadPool* pool, std::string& isa);

// The CPU's model name (/proc/cpuinfo), for every reported figure.
std::string cpu_model();

}   // namespace kimi::app
