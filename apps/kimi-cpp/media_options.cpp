// The image flags and the loader / encoder they make (see media_options.h).
#include "media_options.h"

#include <algorithm>

#include "core/error.h"
#include "image/image_input.h"

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

}   // namespace kimi::app
