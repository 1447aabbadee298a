// VisionEncoder implementation (see vision_encoder.h).
#include "runtime/vision_encoder.h"

#include <chrono>

#include "core/error.h"

namespace kimi {

VisionEncoder::VisionEncoder(const KimiModel& model, Precision precision, int threads, int64_t cache_bytes)
    : model_(model), precision_(precision), cache_bytes_(cache_bytes), pool_(threads) {}

VisionEncoder::Rows VisionEncoder::encode(const image::PreparedImage& img, uint64_t hash,
                                          const std::function<void(int64_t, int64_t)>& progress) {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = index_.find(hash); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        std::lock_guard<std::mutex> sl(stats_mu_);
        ++stats_.hits;
        return it->second->second;
    }
    const auto t0 = std::chrono::steady_clock::now();
    arena_.reset();
    Exec ex;
    ex.pool = &pool_;
    ex.arena = &arena_;
    ex.layer_arena = &scratch_;   // each product's scratch, reused
    ex.precision = precision_;
    const int64_t n_patches = int64_t(img.geom.grid_h) * img.geom.grid_w;
    const Tensor patches(const_cast<float*>(img.patches.data()), DType::kF32,
                         {n_patches, int64_t(img.patches.size()) / std::max<int64_t>(1, n_patches)});
    const Tensor out = model_.encode_image(ex, patches, img.geom.grid_h, img.geom.grid_w, progress);
    auto rows = std::make_shared<const std::vector<float>>(out.f32(), out.f32() + out.numel());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const int64_t bytes = int64_t(rows->size() * sizeof(float));
    if (bytes <= cache_bytes_) {
        lru_.emplace_front(hash, rows);
        index_[hash] = lru_.begin();
        cached_bytes_ += bytes;
        while (cached_bytes_ > cache_bytes_) {   // evict the least recently used
            cached_bytes_ -= int64_t(lru_.back().second->size() * sizeof(float));
            index_.erase(lru_.back().first);
            lru_.pop_back();
        }
    }
    std::lock_guard<std::mutex> sl(stats_mu_);
    ++stats_.misses;
    stats_.encode_ms += ms;
    stats_.encoded_patches += n_patches;
    stats_.cached_bytes = cached_bytes_;
    stats_.cached_images = int64_t(lru_.size());
    return rows;
}

std::vector<MediaSpan> VisionEncoder::encode_prompt(const std::vector<int32_t>& ids,
                                                    std::span<const image::PromptImage> images,
                                                    const std::function<void(int64_t, int64_t)>& progress) {
    const int32_t pad = model_.config().vision.media_pad_id;
    std::vector<MediaSpan> spans;
    for (size_t i = 0; i < ids.size(); ++i) {   // the runs of <|media_pad|>
        if (ids[i] != pad) continue;
        if (!spans.empty() && spans.back().offset + spans.back().n == int64_t(i))
            ++spans.back().n;
        else
            spans.push_back({int64_t(i), 1, 0, nullptr});
    }
    if (spans.size() != images.size())
        throw Error("the prompt has " + std::to_string(spans.size()) + " runs of <|media_pad|> for " +
                    std::to_string(images.size()) + " images");
    for (size_t k = 0; k < spans.size(); ++k) {
        if (spans[k].n != images[k].img.geom.n_tokens)
            throw Error("image " + std::to_string(k) + " has " + std::to_string(images[k].img.geom.n_tokens) +
                        " tokens, its run of <|media_pad|> " + std::to_string(spans[k].n));
        spans[k].hash = images[k].hash;
        spans[k].embeds = encode(images[k].img, images[k].hash, progress);
    }
    return spans;
}

VisionEncoder::Stats VisionEncoder::stats() const {
    std::lock_guard<std::mutex> lk(stats_mu_);
    return stats_;
}

}   // namespace kimi
