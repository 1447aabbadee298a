// MappedFile implementation: POSIX mmap, or pread into huge-page-advised anonymous memory.
#include "core/mapped_file.h"

#include <fcntl.h>
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
}

MappedFile::~MappedFile() {
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
