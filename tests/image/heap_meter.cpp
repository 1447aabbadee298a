// The heap meter of the image tests (see heap_meter.h).
#include "heap_meter.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};
// While g_recording, the requested size of every allocation is noted (up to kMaxRecorded).
constexpr int kMaxRecorded = 1 << 14;
std::atomic<bool> g_recording{false};
std::atomic<int> g_num_recorded{0};
size_t g_recorded[kMaxRecorded];
void record(size_t n) {
    if (!g_recording.load(std::memory_order_relaxed)) return;
    const int i = g_num_recorded.fetch_add(1, std::memory_order_relaxed);
    if (i < kMaxRecorded) g_recorded[i] = n;
}
void heap_add(int64_t n) {
    const int64_t v = g_live.fetch_add(n, std::memory_order_relaxed) + n;
    int64_t p = g_peak.load(std::memory_order_relaxed);
    while (v > p && !g_peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {}
}
}   // namespace

#if defined(__SANITIZE_ADDRESS__)
#define KIMI_HEAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KIMI_HEAP_ASAN 1
#endif
#endif

#ifdef KIMI_HEAP_ASAN
// Under ASan the allocator reports every malloc and free to these hooks.
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*)(const volatile void*, size_t),
                                                         void (*)(const volatile void*));
extern "C" size_t __sanitizer_get_allocated_size(const volatile void*);
namespace {
void on_malloc(const volatile void*, size_t n) {
    record(n);
    heap_add(static_cast<int64_t>(n));
}
void on_free(const volatile void* p) {
    if (p) heap_add(-static_cast<int64_t>(__sanitizer_get_allocated_size(p)));
}
const bool g_hooks = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}   // namespace
#else
// Otherwise malloc and friends are replaced by counting wrappers around glibc's allocator
// (sizes as malloc_usable_size reports them, so frees match allocations).
extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
size_t malloc_usable_size(void*) noexcept;
}
namespace {
void* counted(void* p) {
    if (p) heap_add(static_cast<int64_t>(malloc_usable_size(p)));
    return p;
}
void uncount(void* p) {
    if (p) heap_add(-static_cast<int64_t>(malloc_usable_size(p)));
}
const bool g_hooks = true;
}   // namespace
extern "C" {
void* malloc(size_t n) noexcept {
    record(n);
    return counted(__libc_malloc(n));
}
void free(void* p) noexcept {
    uncount(p);
    __libc_free(p);
}
void* calloc(size_t a, size_t b) noexcept {
    record(a * b);
    return counted(__libc_calloc(a, b));
}
void* realloc(void* p, size_t n) noexcept {
    record(n);
    uncount(p);
    void* q = __libc_realloc(p, n);
    if (q) return counted(q);
    if (p && n) counted(p);   // failed: p is still there
    return nullptr;
}
void* memalign(size_t align, size_t n) noexcept {
    record(n);
    return counted(__libc_memalign(align, n));
}
void* aligned_alloc(size_t align, size_t n) noexcept {
    record(n);
    return counted(__libc_memalign(align, n));
}
int posix_memalign(void** out, size_t align, size_t n) noexcept {
    record(n);
    void* p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = counted(p);
    return 0;
}
}
#endif

namespace kimi::image::test {

int64_t peak_of(const std::function<void()>& fn) {
    const int64_t start = g_live.load();
    g_peak.store(start);
    fn();
    return g_peak.load() - start;
}

bool meter_installed() { return g_hooks; }

bool allocates(int64_t bytes, const std::function<void()>& fn) {
    g_num_recorded = 0;
    g_recording = true;
    fn();
    g_recording = false;
    for (int i = 0; i < std::min(g_num_recorded.load(), kMaxRecorded); ++i)
        if (static_cast<int64_t>(g_recorded[i]) == bytes) return true;
    return false;
}

}   // namespace kimi::image::test
