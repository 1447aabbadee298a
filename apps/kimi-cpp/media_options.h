// The image flags of `serve`, `generate` and `chat` (K3 vision): --allowed-local-media-path DIR,
// --limit-mm-per-prompt image=N, --max-image-tokens N, --mm-cache-memory GiB; and the loader
// and encoder they configure for a loaded model.
#pragma once
#include <memory>
#include <string>

#include "args.h"
#include "model/kimi_model.h"
#include "runtime/vision_encoder.h"
#include "server/media_loader.h"

namespace kimi::app {

struct MediaOptions {
    server::MediaLimits limits;
    int64_t cache_bytes = int64_t(1) << 30;   // --mm-cache-memory (GiB; default 1)
};

MediaOptions parse_media_options(ArgParser& args);

// The image loader of a model: a K3 checkpoint's preprocessing settings, or a loader that
// refuses every image with the reason (Kimi Linear, a K3 export without its tower).
std::unique_ptr<server::MediaLoader> make_media_loader(const KimiModel& model, const std::string& model_dir,
                                                       const MediaOptions& o);
// The encoder (null without a vision tower).
std::unique_ptr<VisionEncoder> make_vision_encoder(const KimiModel& model, Precision precision, int threads,
                                                   const MediaOptions& o);

}   // namespace kimi::app
