// One measurement each of the machine limits (bench machine repeats them; bench model uses
// them for the roofline): read bandwidth over a buffer, and the multiply-add peak.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/thread_pool.h"

namespace kimi::app {

// A buffer of n_words 64-bit words, 64-byte aligned, filled (so its pages exist).
struct ProbeBuffer {
    ProbeBuffer(ThreadPool& pool, int64_t n_words);
    std::unique_ptr<uint64_t, void (*)(void*)> data;
    int64_t n_words;
};

// GB/s of one streaming read of the whole buffer: on the calling thread, or on all of `pool`.
double read_gbs(const ProbeBuffer& b, ThreadPool* pool);

// GFLOP/s of the register-only FMA loop (f32, or bf16 widened) on one thread or on every
// worker of `pool` at once; `isa` receives the instruction set used.
double peak_gflops(bool bf16, ThreadPool* pool, std::string& isa);

// The CPU's model name (/proc/cpuinfo), for every reported figure.
std::string cpu_model();

}   // namespace kimi::app
