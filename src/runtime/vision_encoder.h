// VisionEncoder: a prepared image → its rows for the prompt (the K3 vision tower and projector,
// [N, D]), with a per-engine encoder cache: an LRU by image key (SHA-256, image_key.h), bounded in
// bytes (--mm-cache-memory), so an image seen in an earlier turn is not encoded again; a hit
// also compares the patch grid. Encodes run on the thread that asks (the server's request
// thread), so the engine's decode steps go on meanwhile, and they run side by side: each takes
// a context of its own (thread pool and arenas), so one client's large image never holds up
// another's small one. The same image asked for twice at once is encoded once; the second
// caller waits for the first. An encode stops between tower blocks when its caller is gone or
// past its deadline (EncodeStopped). ref: docs/vision.md#serving, docs/reliability.md#images.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/exec.h"
#include "core/error.h"
#include "image/image_input.h"
#include "model/kimi_model.h"
#include "runtime/request.h"

namespace kimi {

// An encode given up between blocks: the caller went away, or its deadline passed.
struct EncodeStopped : Error {
    EncodeStopped(const std::string& what, bool timed_out) : Error(what), timed_out(timed_out) {}
    bool timed_out;
};

// What may stop an encode, checked before the tower and after each block (and while waiting
// for another caller's encode of the same image).
struct EncodeControl {
    std::function<bool()> cancelled;   // the client is gone
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    std::function<void(int64_t, int64_t)> progress;   // (blocks done, blocks)
};

class VisionEncoder {
public:
    // cache_bytes: the encoder cache's budget (0: no cache). threads: each encode's pool.
    VisionEncoder(const KimiModel& model, Precision precision, int threads, int64_t cache_bytes);
    ~VisionEncoder();

    using Control = EncodeControl;

    using Rows = std::shared_ptr<const std::vector<float>>;   // [N, D] f32
    // The image's rows. Throws EncodeStopped (see Control).
    Rows encode(const image::PromptImage& img, const Control& ctl = {});

    // A rendered prompt's images as the engine takes them: the k-th run of <|media_pad|> in
    // `ids` is images[k] (its token count must match). Throws kimi::Error when they disagree.
    std::vector<MediaSpan> encode_prompt(const std::vector<int32_t>& ids, std::span<const image::PromptImage> images,
                                         const Control& ctl = {});

    struct Stats {
        int64_t hits = 0, misses = 0, cached_images = 0, cached_bytes = 0;
        int64_t stopped = 0;      // encodes given up (cancelled or past their deadline)
        int64_t in_flight = 0;    // encodes running now
        double encode_ms = 0.0;   // total time spent encoding
        int64_t encoded_patches = 0;
    };
    Stats stats() const;

private:
    struct Context;   // one encode's thread pool and arenas
    struct Entry {    // a cached or in-flight image
        image::ImageKey key;
        int32_t grid_h = 0, grid_w = 0;
        Rows rows;   // null while in flight
    };
    struct InFlight {
        bool done = false;
        Rows rows;   // null when the encode stopped
    };

    Rows run(const image::PromptImage& img, const Control& ctl);
    std::unique_ptr<Context> take_context();
    void give_back(std::unique_ptr<Context> c);

    const KimiModel& model_;
    Precision precision_;
    int threads_;
    int64_t cache_bytes_;
    mutable std::mutex mu_;   // everything below
    std::condition_variable done_cv_;
    std::list<Entry> lru_;   // most recent first
    std::unordered_map<image::ImageKey, std::list<Entry>::iterator, image::ImageKeyHash> index_;
    std::unordered_map<image::ImageKey, std::shared_ptr<InFlight>, image::ImageKeyHash> in_flight_;
    std::vector<std::unique_ptr<Context>> idle_;   // at most one kept: its arenas stay warm
    int64_t cached_bytes_ = 0;
    Stats stats_;
};

}   // namespace kimi
