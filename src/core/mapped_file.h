// MappedFile: a whole file, read-only, either memory-mapped (the page cache's 4 KiB pages,
// shared with other processes) or read once into private memory backed by transparent huge
// pages. Streaming gigabytes of weights per decode step through 4 KiB pages costs a TLB walk
// every 4 KiB and stops the hardware prefetchers at every page edge: on the machines we
// measured, batch-1 decode ran at 30–60 % of the read bandwidth mapped and at ~83 % from huge
// pages (docs/performance.md). Neither form converts anything: tensors are views of the bytes.
// A mapped file that is truncated or rewritten in place while mapped makes the next read of a
// lost page raise SIGBUS: the first mapping installs a handler that turns a fault inside a
// mapped file into one line on stderr, "kimi-cpp: fatal: PATH changed on disk while mapped
// (--mmap): ...", and exit status 1; any other SIGBUS keeps its default action.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace kimi {

enum class FileMemory : uint8_t {
    kMap,        // mmap(MAP_POPULATE) of the file
    kMapLazy,    // mmap, pages read on first touch (one pass over a file larger than RAM: quantize)
    kHugeCopy,   // read into 2 MiB-aligned anonymous memory advised for huge pages, then made read-only
};

// How a run's report names the memory: "huge-page copy", "mmap", "mmap (lazy)".
const char* file_memory_name(FileMemory m);

class MappedFile {
public:
    // on_read(bytes) is called as a kHugeCopy read progresses (bytes read since the last call).
    explicit MappedFile(const std::string& path, FileMemory mode = FileMemory::kMap,
                        const std::function<void(uint64_t)>& on_read = {});   // throws kimi::Error naming the file
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const unsigned char* data() const { return static_cast<const unsigned char*>(addr_); }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }
    FileMemory mode() const { return mode_; }

private:
    std::string path_;
    FileMemory mode_;
    void* addr_ = nullptr;   // the file's first byte
    void* map_ = nullptr;    // what munmap releases (map_len_ bytes)
    size_t size_ = 0, map_len_ = 0;
    int range_slot_ = -1;   // its entry in the SIGBUS handler's table of mapped files (-1: none)
};

// Throws kimi::Error unless `path` is a regular file (or does not exist, when missing_ok):
// checked by stat() before a model file is opened, since opening a named pipe blocks until a
// writer comes, and reading a device or directory never ends well.
void check_regular_file(const std::string& path, bool missing_ok = false);

// Whether the kernel gives transparent huge pages to memory advised for them
// (/sys/kernel/mm/transparent_hugepage/enabled is [always] or [madvise]).
bool huge_pages_available();
// MemAvailable of /proc/meminfo in bytes (0 if unreadable), or less where this process's
// memory cgroup (v1 or v2) has a lower limit: that limit minus the group's anonymous memory.
uint64_t memory_available_bytes();
// That cgroup room alone (UINT64_MAX without a memory limit).
uint64_t cgroup_memory_room_bytes();

// This process's resident memory from /proc/self/status, in bytes (zeros if unreadable):
// anonymous (heap, caches, stacks) and file-backed (mapped weights) pages.
struct ResidentMemory {
    uint64_t total = 0, anon = 0, file = 0;
};
ResidentMemory resident_memory();

}   // namespace kimi
