// VisionEncoder implementation (see vision_encoder.h).
#include "runtime/vision_encoder.h"

#include <chrono>

namespace kimi {

VisionEncoder::VisionEncoder(const KimiModel& model, Precision precision, int threads, int64_t cache_bytes)
    : model_(model), precision_(precision), cache_bytes_(cache_bytes), pool_(threads) {}

VisionEncoder::Rows VisionEncoder::encode(const image::PreparedImage& img, uint64_t hash,
                                          const std::function<void(int64_t, int64_t)>& progress) {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = index_.find(hash); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++stats_.hits;
        return it->second->second;
    }
    ++stats_.misses;
    const auto t0 = std::chrono::steady_clock::now();
    arena_.reset();
    Exec ex;
    ex.pool = &pool_;
    ex.arena = &arena_;
    ex.precision = precision_;
    const int64_t n_patches = int64_t(img.geom.grid_h) * img.geom.grid_w;
    const Tensor patches(const_cast<float*>(img.patches.data()), DType::kF32,
                         {n_patches, int64_t(img.patches.size()) / std::max<int64_t>(1, n_patches)});
    const Tensor out = model_.encode_image(ex, patches, img.geom.grid_h, img.geom.grid_w, progress);
    auto rows = std::make_shared<const std::vector<float>>(out.f32(), out.f32() + out.numel());
    stats_.encode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    stats_.encoded_patches += n_patches;
    const int64_t bytes = int64_t(rows->size() * sizeof(float));
    if (bytes <= cache_bytes_) {
        lru_.emplace_front(hash, rows);
        index_[hash] = lru_.begin();
        stats_.cached_bytes += bytes;
        while (stats_.cached_bytes > cache_bytes_) {   // evict the least recently used
            stats_.cached_bytes -= int64_t(lru_.back().second->size() * sizeof(float));
            index_.erase(lru_.back().first);
            lru_.pop_back();
        }
    }
    stats_.cached_images = int64_t(lru_.size());
    return rows;
}

VisionEncoder::Stats VisionEncoder::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
}

}   // namespace kimi
