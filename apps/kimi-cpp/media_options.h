// The image flags of `serve`, `generate` and `chat` (K3 vision): --allowed-local-media-path DIR,
// --limit-mm-per-prompt image=N, --max-image-tokens N, --max-image-pixels N,
// --mm-request-memory GiB, --mm-cache-memory GiB; and the loader and encoder they configure for
// a loaded model. (`serve` alone adds --mm-memory GiB: the images of all requests in flight.)
#pragma once
#include <memory>
#include <string>

#include "args.h"
#include "model/kimi_model.h"
#include "runtime/vision_encoder.h"
#include "server/media_loader.h"
#include "tokenizer/tokenizer.h"

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

// The terminal commands' images (generate --image, chat /image): any local file, encoded with
// a progress bar for big images.
class LocalImages {
public:
    LocalImages(const KimiModel& model, const std::string& model_dir, const MediaOptions& o, Precision precision,
                int threads, bool quiet);
    image::PromptImage load(const std::string& path) const;   // throws kimi::Error naming the file
    // The prompt's images as the engine takes them (their runs of <|media_pad|> in ids).
    std::vector<MediaSpan> encode(const std::vector<int32_t>& ids, std::span<const image::PromptImage> images);
    const server::MediaLoader& loader() const { return *loader_; }

private:
    std::unique_ptr<server::MediaLoader> loader_;
    std::unique_ptr<VisionEncoder> encoder_;
    bool quiet_;
};

// A raw prompt with images: each <|kimi_image_placeholder|> in `text` is replaced by the next
// image's prompt (images without a placeholder go first, in order). special: the text's own
// special-token spellings are tokens.
std::vector<int32_t> raw_prompt_with_images(const tok::Tokenizer& tok, const std::string& text, bool special,
                                            std::span<const image::PromptImage> images);

}   // namespace kimi::app
