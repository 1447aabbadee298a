// Exec: what every op needs besides its tensors — the thread pool, the step's arena, the
// activation precision, and the step counters. Passed explicitly (no global context).
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "core/thread_pool.h"

namespace kimi {

// f32: weights widened exactly, f32 activations and accumulation (the oracle-grade path).
// bf16: matrix products round their activation input to bf16 (weights as stored) and
// accumulate in f32; everything else stays f32.
enum class Precision : uint8_t { kF32, kBF16 };

// direct: the decoder adds the tensor attention returned (o_proj's own output) into the
// residual. copy: the A/B baseline — attention output is first copied into a caller buffer.
enum class AttnOutputMode : uint8_t { kDirect, kCopy };

struct StepCounters {
    int64_t attn_output_copies = 0;   // copies of attention outputs this step
    int64_t heap_allocations = 0;     // operator-new calls this step (all threads)
    int64_t page_faults = 0;          // page faults of the process during this step
    int64_t n_tokens = 0;
    double step_ms = 0.0;
};

// Where the last attention's o_proj wrote, and which buffer the residual add read: the
// ownership tests compare these pointers (two stores per layer, nothing else).
struct OutputTrace {
    const void* o_proj_output = nullptr;
    const void* residual_addend = nullptr;
};

struct Exec {
    ThreadPool* pool = nullptr;
    Arena* arena = nullptr;   // the step's activations (reset per step)
    // Scratch of one decoder layer, reset after each layer so a step's high-water mark is one
    // layer's scratch, not all of them (nullptr: layers allocate from `arena` too).
    Arena* layer_arena = nullptr;
    Precision precision = Precision::kF32;
    AttnOutputMode attn_output = AttnOutputMode::kDirect;
    StepCounters counters;
    OutputTrace trace;
};

}   // namespace kimi
