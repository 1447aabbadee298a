// MappedFile implementation: POSIX mmap, or pread into huge-page-advised anonymous memory.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kimi {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kReadChunk = size_t(64) << 20;   // bytes per pread (and per progress report)

std::string errno_text() { return std::strerror(errno); }

// --- SIGBUS on a mapped file ----------------------------------------------------------------
// A read of a mapped page the file no longer has (truncated, or rewritten in place by a tool
// that truncates first) raises SIGBUS, which would kill the process without a word. The live
// mappings are kept in a fixed table the handler can read without locks or allocation; a fault
// inside one is reported as a one-line fatal error naming the file, and the process exits 1.

constexpr size_t kMaxRanges = 1024;   // mapped files at once (a checkpoint's shards); more go unnamed
constexpr size_t kPathBytes = 512;    // a longer path is cut

struct MappedRange {
    std::atomic<int> state{0};   // 0 free, 1 being filled, 2 live
    std::atomic<uintptr_t> begin{0}, end{0};
    char path[kPathBytes];
};
MappedRange g_ranges[kMaxRanges];
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<uintptr_t>::is_always_lock_free,
              "the SIGBUS handler reads these without locks");

void append(char* buf, size_t cap, size_t& n, const char* s) {
    for (; *s && n + 1 < cap; ++s) buf[n++] = *s;
}

std::atomic<bool> g_reporting{false};   // a thread is writing the fatal line

void on_sigbus(int sig, siginfo_t* info, void*) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    // si_addr means the faulting address only for a fault the kernel raised (si_code > 0), not
    // for a SIGBUS sent by kill() or raise().
    for (MappedRange& r : g_ranges) {
        if (info->si_code <= 0) break;
        if (r.state.load(std::memory_order_acquire) != 2) continue;
        if (addr < r.begin.load(std::memory_order_relaxed) || addr >= r.end.load(std::memory_order_relaxed)) continue;
        // Threads faulting at once (a step's workers read the same weights): one line, one exit.
        if (g_reporting.exchange(true))
            for (;;) ::pause();
        char msg[kPathBytes + 256];
        size_t n = 0;
        append(msg, sizeof msg, n, "kimi-cpp: fatal: ");
        append(msg, sizeof msg, n, r.path);
        append(msg, sizeof msg, n,
               " changed on disk while mapped (--mmap): a read of its mapped bytes failed, as the file was "
               "truncated or rewritten in place; restore it and restart\n");
        for (size_t done = 0; done < n;) {   // write(2) is async-signal-safe; printf is not
            const ssize_t w = ::write(STDERR_FILENO, msg + done, n - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            done += size_t(w);
        }
        ::_exit(1);
    }
    // Not a mapped file's fault: die of it as before (the fault recurs on return).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    ::raise(sig);
}

void install_sigbus_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, nullptr);
    });
}

// The slot now naming [begin, begin + len) as `path`, or -1 when the table is full.
int register_range(const void* begin, size_t len, const std::string& path) {
    install_sigbus_handler();
    for (size_t i = 0; i < kMaxRanges; ++i) {
        int expected = 0;
        if (!g_ranges[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
        MappedRange& r = g_ranges[i];
        const size_t k = std::min(path.size(), kPathBytes - 1);
        std::memcpy(r.path, path.data(), k);
        r.path[k] = '\0';
        r.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_relaxed);
        r.end.store(reinterpret_cast<uintptr_t>(begin) + len, std::memory_order_relaxed);
        r.state.store(2, std::memory_order_release);
        return int(i);
    }
    return -1;
}

void unregister_range(int slot) {
    if (slot >= 0) g_ranges[size_t(slot)].state.store(0, std::memory_order_release);
}

// Reads [0, size) of fd into dst in 64 MiB chunks taken in turn by several threads: a
// single reader tops out near 1 GB/s here, as each first touch of a huge page makes the
// kernel clear 2 MiB before the copy into it; clearing and copying scale with the threads
// (the memory bus is far from busy). Returns "" or why the read failed.
std::string read_parallel(int fd, unsigned char* dst, size_t size, const std::function<void(uint64_t)>& on_read) {
    const size_t n_chunks = (size + kReadChunk - 1) / kReadChunk;
    const size_t n_threads = std::min<size_t>({n_chunks, std::max(1u, std::thread::hardware_concurrency()), 16});
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;   // guards failure and on_read
    std::string failure;
    auto work = [&] {
        for (size_t c = next++; c < n_chunks && !failed; c = next++) {
            const size_t begin = c * kReadChunk, end = std::min(size, begin + kReadChunk);
            for (size_t got = begin; got < end;) {
                const ssize_t r = ::pread(fd, dst + got, end - got, off_t(got));
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) {
                    const std::lock_guard<std::mutex> lock(mu);
                    if (failure.empty())
                        failure = r < 0 ? "read failed: " + errno_text() : "file shrank while being read";
                    failed = true;
                    return;
                }
                got += size_t(r);
            }
            if (on_read) {
                const std::lock_guard<std::mutex> lock(mu);
                on_read(uint64_t(end - begin));
            }
        }
    };
    std::vector<std::thread> helpers;
    for (size_t t = 1; t < n_threads; ++t) helpers.emplace_back(work);
    work();
    for (std::thread& t : helpers) t.join();
    return failure;
}
}   // namespace

const char* file_memory_name(FileMemory m) {
    return m == FileMemory::kHugeCopy ? "huge-page copy" : m == FileMemory::kMap ? "mmap" : "mmap (lazy)";
}

MappedFile::MappedFile(const std::string& path, FileMemory mode, const std::function<void(uint64_t)>& on_read)
    : path_(path), mode_(mode) {
    check_regular_file(path);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);   // never waits on a pipe swapped in since
    if (fd < 0) throw Error(path + ": cannot open: " + errno_text());
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ == 0) {
        ::close(fd);
        return;
    }
    std::string failure;
    if (mode == FileMemory::kMap || mode == FileMemory::kMapLazy) {
        // why: MAP_POPULATE faults every page in now (the load), not during the first steps —
        // a cold prefill otherwise spends most of its time in page faults on the weights.
        map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (mode == FileMemory::kMap ? MAP_POPULATE : 0), fd, 0);
        map_len_ = size_;
        if (map_ == MAP_FAILED) failure = "mmap failed: " + errno_text();
        addr_ = map_;
    } else {
        // One huge page of slack so the data can start on a 2 MiB boundary.
        map_len_ = (size_ + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
        map_ = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map_ == MAP_FAILED) {
            failure = "cannot allocate " + std::to_string(size_ >> 20) + " MiB for the weights: " + errno_text();
        } else {
            auto* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(map_) + kHugePage - 1) &
                                                          ~(kHugePage - 1));
            ::madvise(base, size_, MADV_HUGEPAGE);   // advisory: without THP this is plain memory
            addr_ = base;
            failure = read_parallel(fd, base, size_, on_read);
            if (failure.empty()) ::mprotect(base, size_, PROT_READ);   // weights are never written
        }
    }
    ::close(fd);
    if (!failure.empty()) {
        if (map_ != MAP_FAILED && map_ != nullptr) ::munmap(map_, map_len_);
        map_ = addr_ = nullptr;
        throw Error(path + ": " + failure);
    }
    if (mode == FileMemory::kMap || mode == FileMemory::kMapLazy) range_slot_ = register_range(map_, map_len_, path_);
}

MappedFile::~MappedFile() {
    unregister_range(range_slot_);   // before the range is gone
    if (map_) ::munmap(map_, map_len_);
}

void check_regular_file(const std::string& path, bool missing_ok) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (missing_ok && errno == ENOENT) return;
        throw Error(path + ": cannot open: " + errno_text());
    }
    if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
}

bool huge_pages_available() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(f, s);
    return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

namespace {
// The first number in a file (0 if none, or "max").
uint64_t read_number(const std::string& path) {
    std::ifstream f(path);
    uint64_t v = 0;
    return f >> v ? v : 0;
}
// The value of `key` in a "key value" file such as memory.stat (0 if absent).
uint64_t stat_value(const std::string& path, const std::string& key) {
    std::ifstream f(path);
    std::string k;
    uint64_t v = 0;
    while (f >> k >> v)
        if (k == key) return v;
    return 0;
}
}   // namespace

uint64_t cgroup_memory_room_bytes() {
    // why: in a container the host's MemAvailable is not this process's to take; a checkpoint
    // copied into memory over the cgroup's limit gets the process killed, not swapped.
    std::ifstream f("/proc/self/cgroup");
    std::string line;
    while (std::getline(f, line)) {
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        uint64_t limit = 0, anon = 0;
        if (controllers == "memory") {   // cgroup v1
            const std::string dir = "/sys/fs/cgroup/memory" + path;
            limit = read_number(dir + "/memory.limit_in_bytes");
            anon = stat_value(dir + "/memory.stat", "total_rss");
        } else if (controllers.empty() && line.rfind("0::", 0) == 0) {   // cgroup v2
            const std::string dir = "/sys/fs/cgroup" + path;
            limit = read_number(dir + "/memory.max");   // "max": 0, no limit
            anon = stat_value(dir + "/memory.stat", "anon");
        }
        // page cache in the group is reclaimable; its anonymous memory is not
        if (limit > 0 && limit < (uint64_t(1) << 60)) return limit > anon ? limit - anon : 0;
    }
    return UINT64_MAX;
}

uint64_t memory_available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("MemAvailable:", 0) != 0) continue;
        std::istringstream in(line.substr(13));
        uint64_t kib = 0;
        in >> kib;
        return std::min(kib * 1024, cgroup_memory_room_bytes());
    }
    return 0;
}

ResidentMemory resident_memory() {
    std::ifstream f("/proc/self/status");
    std::string line;
    ResidentMemory m;
    auto kib = [&line](size_t skip) {
        std::istringstream in(line.substr(skip));
        uint64_t v = 0;
        in >> v;
        return v * 1024;
    };
    while (std::getline(f, line)) {
        if (line.rfind("VmRSS:", 0) == 0)
            m.total = kib(6);
        else if (line.rfind("RssAnon:", 0) == 0)
            m.anon = kib(8);
        else if (line.rfind("RssFile:", 0) == 0)
            m.file = kib(8);
    }
    return m;
}

}   // namespace kimi
