// The image flags and the loader / encoder they make (see media_options.h).
#include "media_options.h"

#include <algorithm>

#include "core/error.h"
#include "image/image_input.h"
#include "progress.h"

namespace kimi::app {

MediaOptions parse_media_options(ArgParser& args) {
    MediaOptions o;
    o.limits.source.allowed_local_media_path = args.str("--allowed-local-media-path", "");
    if (auto lim = args.opt("--limit-mm-per-prompt")) {
        // vLLM's forms: image=N, or JSON {"image": N}
        std::string v = *lim;
        for (char c : std::string("{}\" ")) v.erase(std::remove(v.begin(), v.end(), c), v.end());
        const size_t sep = v.find_first_of("=:");
        if (sep == std::string::npos || v.substr(0, sep) != "image")
            throw Error("--limit-mm-per-prompt expects image=N (only images are supported)");
        try {
            size_t used = 0;
            const long n = std::stol(v.substr(sep + 1), &used);
            if (used != v.size() - sep - 1 || n < 0 || n > 1024) throw Error("");
            o.limits.images_per_prompt = int32_t(n);
        } catch (const std::exception&) {
            throw Error("--limit-mm-per-prompt image=N needs N in [0, 1024]");
        }
    }
    o.limits.max_image_tokens = args.integer("--max-image-tokens", 0);
    if (o.limits.max_image_tokens < 0 || o.limits.max_image_tokens > (int64_t(1) << 24))
        throw Error("--max-image-tokens must be in [1, 16777216] (0: the checkpoint's budget)");
    o.limits.max_image_pixels = args.integer("--max-image-pixels", o.limits.max_image_pixels);
    if (o.limits.max_image_pixels < 1 || o.limits.max_image_pixels > int64_t(65500) * 65500)
        throw Error("--max-image-pixels must be in [1, 4290250000]");
    const double request_gib = args.real("--mm-request-memory", 1.0);
    if (!(request_gib > 0.0) || request_gib > 1 << 20) throw Error("--mm-request-memory must be a size in GiB > 0");
    o.limits.request_bytes = int64_t(request_gib * 1024.0 * 1024.0 * 1024.0);
    const double gib = args.real("--mm-cache-memory", 1.0);
    if (!(gib >= 0.0) || gib > 1 << 20) throw Error("--mm-cache-memory must be a size in GiB >= 0");
    o.cache_bytes = int64_t(gib * 1024.0 * 1024.0 * 1024.0);
    return o;
}

std::unique_ptr<server::MediaLoader> make_media_loader(const KimiModel& model, const std::string& model_dir,
                                                       const MediaOptions& o) {
    image::MediaConfig mc;
    if (model.has_vision()) {
        mc = image::load_media_config(model_dir);
        if (mc.patch_size != model.config().vision.patch_size)
            throw Error(model_dir + "/preprocessor_config.json: patch_size " + std::to_string(mc.patch_size) +
                        " differs from the vision tower's " + std::to_string(model.config().vision.patch_size));
        if (mc.merge_kernel_size != model.config().vision.merge)
            throw Error(model_dir + "/preprocessor_config.json: merge_kernel_size differs from the vision tower's");
    }
    return std::make_unique<server::MediaLoader>(mc, o.limits, model.vision_unavailable_reason());
}

std::unique_ptr<VisionEncoder> make_vision_encoder(const KimiModel& model, Precision precision, int threads,
                                                   const MediaOptions& o) {
    if (!model.has_vision()) return nullptr;
    return std::make_unique<VisionEncoder>(model, precision, threads, o.cache_bytes);
}

LocalImages::LocalImages(const KimiModel& model, const std::string& model_dir, const MediaOptions& o,
                         Precision precision, int threads, bool quiet)
    : quiet_(quiet) {
    MediaOptions local = o;
    if (local.limits.source.allowed_local_media_path.empty()) local.limits.source.allowed_local_media_path = "/";
    loader_ = make_media_loader(model, model_dir, local);
    encoder_ = make_vision_encoder(model, precision, threads, o);
}

image::PromptImage LocalImages::load(const std::string& path) const {
    try {
        return loader_->load_bytes(image::read_file_bytes(path, loader_->limits().source.max_bytes), path);
    } catch (const server::ImageError& e) {
        throw Error(e.what());
    }
}

std::vector<MediaSpan> LocalImages::encode(const std::vector<int32_t>& ids,
                                           std::span<const image::PromptImage> images) {
    if (images.empty()) return {};
    KIMI_CHECK(encoder_ != nullptr, "images loaded without an encoder");
    Progress bar("encode image", quiet_);
    VisionEncoder::Control ctl;
    ctl.progress = [&](int64_t done, int64_t total) { bar.update(double(done), double(total), "blocks"); };
    auto spans = encoder_->encode_prompt(ids, images, ctl);
    bar.finish();
    return spans;
}

std::vector<int32_t> raw_prompt_with_images(const tok::Tokenizer& tok, const std::string& text, bool special,
                                            std::span<const image::PromptImage> images) {
    std::vector<std::string> pieces;   // text between placeholders
    const std::string ph = chat::kImagePlaceholder;
    for (size_t at = 0;;) {
        const size_t next = text.find(ph, at);
        pieces.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
        if (next == std::string::npos) break;
        at = next + ph.size();
    }
    const size_t marked = pieces.size() - 1;
    if (marked > images.size())
        throw Error("the prompt has " + std::to_string(marked) + " " + ph + " but only " +
                    std::to_string(images.size()) + " --image");
    if (marked != 0 && marked != images.size())
        throw Error("the prompt marks " + std::to_string(marked) + " image places (" + ph + ") for " +
                    std::to_string(images.size()) + " --image: mark all or none");
    const auto image_ids = [&](const image::PromptImage& p) {
        return tok.encode(chat::image_prompt_text({p.img.geom.width, p.img.geom.height, p.img.geom.n_tokens}), true);
    };
    std::vector<int32_t> ids;
    const auto add = [&ids](const std::vector<int32_t>& v) { ids.insert(ids.end(), v.begin(), v.end()); };
    if (marked == 0)
        for (const auto& p : images) add(image_ids(p));
    for (size_t k = 0; k < pieces.size(); ++k) {
        add(tok.encode(pieces[k], special));
        if (k < marked) add(image_ids(images[k]));
    }
    return ids;
}

}   // namespace kimi::app
