// MediaLoader: the image parts of a chat request → prepared images (decoded, resized and cut
// into patches exactly as the checkpoint's processor does) and the numbers the prompt shows
// for each (size, token count), within the server's limits: --limit-mm-per-prompt image=N,
// --max-image-tokens, --allowed-local-media-path for file:// URLs. Encoding the images is
// the VisionEncoder's job (after parsing). ref: docs/server.md#images.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "core/error.h"
#include "image/image_input.h"

namespace kimi::server {

// A refused image (bad URL, undecodable bytes, over a limit, a model without a tower): a 400.
struct ImageError : Error {
    using Error::Error;
};

using image::PromptImage;

struct MediaLimits {
    image::SourcePolicy source;
    int32_t images_per_prompt = 8;   // --limit-mm-per-prompt image=N
    int64_t max_image_tokens = 0;    // --max-image-tokens (0: the checkpoint's budget)
};

class MediaLoader {
public:
    // unavailable: why this model takes no images ("" when it does).
    MediaLoader(image::MediaConfig media, MediaLimits limits, std::string unavailable);

    // A resolver for one request's render: each image part is loaded and appended to `out`.
    chat::ImageResolver resolver(std::vector<PromptImage>& out) const;
    // One image part (OpenAI {"type": "image_url", "image_url": {"url": ...}} or a bare URL
    // string) or encoded bytes → a prepared image. Throws ImageError.
    PromptImage load_part(const nlohmann::ordered_json& part, const std::string& where) const;
    PromptImage load_bytes(const std::vector<uint8_t>& bytes, const std::string& where) const;

    const image::MediaConfig& media_config() const { return media_; }   // with the token cap applied
    const MediaLimits& limits() const { return limits_; }

private:
    image::MediaConfig media_;
    MediaLimits limits_;
    std::string unavailable_;
};

}   // namespace kimi::server
