// VisionEncoder implementation (see vision_encoder.h).
#include "runtime/vision_encoder.h"

#include "core/arena.h"
#include "core/thread_pool.h"

namespace kimi {

struct VisionEncoder::Context {
    explicit Context(int threads) : pool(threads) {}
    ThreadPool pool;
    Arena arena, scratch;   // the image's activations; one product's scratch at a time
};

VisionEncoder::VisionEncoder(const KimiModel& model, Precision precision, int threads, int64_t cache_bytes)
    : model_(model), precision_(precision), threads_(threads), cache_bytes_(cache_bytes) {}

VisionEncoder::~VisionEncoder() = default;

namespace {

// Throws EncodeStopped when the caller is gone or past its deadline.
void check(const VisionEncoder::Control& ctl) {
    if (ctl.cancelled && ctl.cancelled())
        throw EncodeStopped("the client went away while its image was encoded", false);
    if (std::chrono::steady_clock::now() >= ctl.deadline)
        throw EncodeStopped("encoding the request's images took longer than its deadline (--request-timeout)", true);
}

}   // namespace

std::unique_ptr<VisionEncoder::Context> VisionEncoder::take_context() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (!idle_.empty()) {
            auto c = std::move(idle_.back());
            idle_.pop_back();
            return c;
        }
    }
    return std::make_unique<Context>(threads_);
}

void VisionEncoder::give_back(std::unique_ptr<Context> c) {
    std::lock_guard<std::mutex> lk(mu_);
    if (idle_.empty()) idle_.push_back(std::move(c));   // more than one idle: freed (their arenas with them)
}

VisionEncoder::Rows VisionEncoder::encode(const image::PromptImage& img, const Control& ctl) {
    const image::ImageGeometry& g = img.img.geom;
    std::shared_ptr<InFlight> mine;
    {
        std::unique_lock<std::mutex> lk(mu_);
        for (;;) {
            if (auto it = index_.find(img.key);
                it != index_.end() && it->second->grid_h == g.grid_h && it->second->grid_w == g.grid_w) {
                lru_.splice(lru_.begin(), lru_, it->second);
                ++stats_.hits;
                return it->second->rows;
            }
            auto f = in_flight_.find(img.key);
            if (f == in_flight_.end()) break;
            // Another caller encodes this image: wait for it (checking our own stop between waits).
            const std::shared_ptr<InFlight> other = f->second;
            while (!other->done) {
                lk.unlock();
                check(ctl);
                lk.lock();
                done_cv_.wait_for(lk, std::chrono::milliseconds(20), [&] { return other->done; });
            }
            if (other->rows) {
                ++stats_.hits;
                return other->rows;
            }
            // it stopped: look again (this caller may encode it)
        }
        mine = std::make_shared<InFlight>();
        in_flight_.emplace(img.key, mine);
        ++stats_.in_flight;
    }
    Rows rows;
    try {
        rows = run(img, ctl);
    } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        in_flight_.erase(img.key);
        --stats_.in_flight;
        mine->done = true;
        done_cv_.notify_all();
        throw;
    }
    std::lock_guard<std::mutex> lk(mu_);
    in_flight_.erase(img.key);
    --stats_.in_flight;
    mine->rows = rows;
    mine->done = true;
    done_cv_.notify_all();
    const int64_t bytes = int64_t(rows->size() * sizeof(float));
    if (bytes <= cache_bytes_ && !index_.count(img.key)) {
        lru_.push_front({img.key, g.grid_h, g.grid_w, rows});
        index_[img.key] = lru_.begin();
        cached_bytes_ += bytes;
        while (cached_bytes_ > cache_bytes_) {   // evict the least recently used
            cached_bytes_ -= int64_t(lru_.back().rows->size() * sizeof(float));
            index_.erase(lru_.back().key);
            lru_.pop_back();
        }
    }
    stats_.cached_bytes = cached_bytes_;
    stats_.cached_images = int64_t(lru_.size());
    return rows;
}

// One encode on a context of its own: the tower, stopped between blocks when `ctl` says so.
VisionEncoder::Rows VisionEncoder::run(const image::PromptImage& img, const Control& ctl) {
    const auto t0 = std::chrono::steady_clock::now();
    const image::PreparedImage& p = img.img;
    const int64_t n_patches = int64_t(p.geom.grid_h) * p.geom.grid_w;
    std::unique_ptr<Context> c;
    Rows rows;
    try {
        check(ctl);
        c = take_context();
        c->arena.reset();
        Exec ex;
        ex.pool = &c->pool;
        ex.arena = &c->arena;
        ex.layer_arena = &c->scratch;   // each product's scratch, reused
        ex.precision = precision_;
        const Tensor patches(const_cast<float*>(p.patches.data()), DType::kF32,
                             {n_patches, int64_t(p.patches.size()) / std::max<int64_t>(1, n_patches)});
        const Tensor out = model_.encode_image(ex, patches, p.geom.grid_h, p.geom.grid_w, [&](int64_t done, int64_t n) {
            if (ctl.progress) ctl.progress(done, n);
            check(ctl);
        });
        rows = std::make_shared<const std::vector<float>>(out.f32(), out.f32() + out.numel());
    } catch (const EncodeStopped&) {
        if (c) give_back(std::move(c));
        std::lock_guard<std::mutex> lk(mu_);
        ++stats_.stopped;
        throw;
    }
    give_back(std::move(c));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.misses;
    stats_.encode_ms += ms;
    stats_.encoded_patches += n_patches;
    return rows;
}

std::vector<MediaSpan> VisionEncoder::encode_prompt(const std::vector<int32_t>& ids,
                                                    std::span<const image::PromptImage> images, const Control& ctl) {
    const int32_t pad = model_.config().vision.media_pad_id;
    std::vector<MediaSpan> spans;
    for (size_t i = 0; i < ids.size(); ++i) {   // the runs of <|media_pad|>
        if (ids[i] != pad) continue;
        if (!spans.empty() && spans.back().offset + spans.back().n == int64_t(i))
            ++spans.back().n;
        else
            spans.push_back({int64_t(i), 1, {}, nullptr});
    }
    if (spans.size() != images.size())
        throw Error("the prompt has " + std::to_string(spans.size()) + " runs of <|media_pad|> for " +
                    std::to_string(images.size()) + " images");
    for (size_t k = 0; k < spans.size(); ++k) {
        if (spans[k].n != images[k].img.geom.n_tokens)
            throw Error("image " + std::to_string(k) + " has " + std::to_string(images[k].img.geom.n_tokens) +
                        " tokens, its run of <|media_pad|> " + std::to_string(spans[k].n));
        spans[k].key = images[k].key;
        spans[k].embeds = encode(images[k], ctl);
    }
    return spans;
}

VisionEncoder::Stats VisionEncoder::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
}

}   // namespace kimi
