// Heap-allocation counter: the global operator new is replaced (alloc_counter.cpp) to count
// allocations per thread. The engine reads the delta around a forward step; thread-pool
// workers fold their own counts into the pool total so a step sees all of its threads.
#pragma once
#include <cstdint>

namespace kimi {

uint64_t thread_alloc_count();   // allocations made by the calling thread since it started

}  // namespace kimi
