// ImageBudget: the bytes the images of all requests in flight may take at once (--mm-memory):
// a request takes its images' share (the bound of decoding and preparing them, from their
// headers) before any pixel is decoded, and gives it back once they are encoded. Past the
// limit a request waits for room, until its deadline or its client leaving. ref:
// docs/reliability.md#images.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace kimi::server {

class ImageBudget {
public:
    explicit ImageBudget(int64_t total_bytes) : total_(total_bytes) {}

    class Lease {   // gives its bytes back when destroyed
    public:
        Lease() = default;
        Lease(Lease&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; }
        Lease& operator=(Lease&&) = delete;
        ~Lease();
        explicit operator bool() const { return budget_ != nullptr; }

    private:
        friend class ImageBudget;
        Lease(ImageBudget* b, int64_t bytes) : budget_(b), bytes_(bytes) {}
        ImageBudget* budget_ = nullptr;
        int64_t bytes_ = 0;
    };

    // Takes `bytes` (<= total()) once they fit. An empty lease when the deadline passed or
    // stop() said so first (checked every few milliseconds). waited (if given): whether the
    // bytes did not fit at once.
    Lease acquire(int64_t bytes, std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stop,
                  bool* waited = nullptr);

    int64_t total() const { return total_; }
    int64_t in_use() const;

private:
    const int64_t total_;
    mutable std::mutex mu_;
    std::condition_variable freed_;
    int64_t used_ = 0;
};

}   // namespace kimi::server
