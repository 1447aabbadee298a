// VisionEncoder: a prepared image → its rows for the prompt (the K3 vision tower and projector,
// [N, D]), with a per-engine encoder cache: an LRU by content hash, bounded in bytes
// (--mm-cache-memory), so an image seen in an earlier turn is not encoded again. It runs on
// its own thread pool and arena, on the thread that asks (the server's request thread), so the
// engine's decode steps go on while an image is encoded. ref: docs/vision.md#serving.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/exec.h"
#include "core/arena.h"
#include "core/thread_pool.h"
#include "image/image_input.h"
#include "model/kimi_model.h"
#include "runtime/request.h"

namespace kimi {

class VisionEncoder {
public:
    // cache_bytes: the encoder cache's budget (0: no cache).
    VisionEncoder(const KimiModel& model, Precision precision, int threads, int64_t cache_bytes);

    using Rows = std::shared_ptr<const std::vector<float>>;   // [N, D] f32
    // The image's rows (hash: image::content_hash of it). One image is encoded at a time;
    // callers on other threads wait. progress(blocks done, blocks) while encoding.
    Rows encode(const image::PreparedImage& img, uint64_t hash,
                const std::function<void(int64_t, int64_t)>& progress = {});

    // A rendered prompt's images as the engine takes them: the k-th run of <|media_pad|> in
    // `ids` is images[k] (its token count must match). Throws kimi::Error when they disagree.
    std::vector<MediaSpan> encode_prompt(const std::vector<int32_t>& ids, std::span<const image::PromptImage> images,
                                         const std::function<void(int64_t, int64_t)>& progress = {});

    struct Stats {
        int64_t hits = 0, misses = 0, cached_images = 0, cached_bytes = 0;
        double encode_ms = 0.0;   // total time spent encoding
        int64_t encoded_patches = 0;
    };
    Stats stats() const;

private:
    const KimiModel& model_;
    Precision precision_;
    int64_t cache_bytes_;
    std::mutex mu_;                 // one encode at a time; the cache
    mutable std::mutex stats_mu_;   // the counters alone (read by /metrics while an image encodes)
    ThreadPool pool_;
    Arena arena_, scratch_;                      // the image's activations; one product's scratch at a time
    std::list<std::pair<uint64_t, Rows>> lru_;   // most recent first
    std::unordered_map<uint64_t, std::list<std::pair<uint64_t, Rows>>::iterator> index_;
    int64_t cached_bytes_ = 0;   // under mu_
    Stats stats_;                // under stats_mu_
};

}   // namespace kimi
