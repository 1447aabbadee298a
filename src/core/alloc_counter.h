// Memory counters. Heap allocations: the global operator new is replaced (alloc_counter.cpp) to count
// allocations per thread. The engine reads the delta around a forward step; thread-pool
// workers fold their own counts into the pool total so a step sees all of its threads.
#pragma once
#include <cstdint>

namespace kimi {

uint64_t thread_alloc_count();   // allocations made by the calling thread since it started
void count_allocation();         // counts an allocation made outside operator new (aligned_alloc)

// Page faults (minor + major) of the whole process so far (getrusage): a step's delta shows
// memory being faulted in — scratch released and touched again, or first touches.
uint64_t process_page_faults();

}   // namespace kimi
