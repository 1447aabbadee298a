// The heap meter of the image tests: live heap bytes and their peak over every allocation of the
// process, the C libraries' mallocs included (ASan's allocator hooks under ASan; otherwise malloc
// and friends replaced by counting wrappers around glibc's). Linked into a test binary, it counts
// for the whole binary.
#pragma once
#include <cstdint>
#include <functional>

namespace kimi::image::test {

// Whether the meter counts (the ASan hooks were accepted).
bool meter_installed();
// The heap peak of fn() above the heap in use when it starts.
int64_t peak_of(const std::function<void()>& fn);
// Whether fn() asks for an allocation of exactly `bytes` (among its first 16,384).
bool allocates(int64_t bytes, const std::function<void()>& fn);

}   // namespace kimi::image::test
