// MediaLoader: the image parts of a chat request → prepared images (decoded, resized and cut
// into patches exactly as the checkpoint's processor does) and the numbers the prompt shows
// for each (size, token count), within the server's limits: --limit-mm-per-prompt image=N,
// --max-image-tokens, --max-image-pixels, --mm-request-memory, --allowed-local-media-path for
// file:// URLs. Budgets come before work: the server's resolver reads each image only as far as
// its header (size, token count, the memory its decode needs) and decodes nothing, so a request
// over a limit is refused before any pixel exists. Encoding the images is the VisionEncoder's
// job (after parsing). ref: docs/server.md#images, docs/reliability.md#images.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "core/error.h"
#include "image/image_input.h"
#include "image/probe.h"
#include "server/response_store.h"

namespace kimi::server {

// A refused image (bad URL, undecodable bytes, over a limit, a model without a tower): a 400.
struct ImageError : Error {
    using Error::Error;
};

using image::PromptImage;

struct MediaLimits {
    image::SourcePolicy source;
    int32_t images_per_prompt = 8;              // --limit-mm-per-prompt image=N
    int64_t max_image_tokens = 0;               // --max-image-tokens (0: the checkpoint's budget)
    int64_t max_image_pixels = 89478485;        // --max-image-pixels (Pillow's decompression-bomb limit)
    int64_t request_bytes = int64_t(1) << 30;   // --mm-request-memory: decoding one request's images
};

// An image part read as far as its header: nothing decoded yet.
struct PendingImage {
    std::vector<uint8_t> bytes;   // encoded
    image::ImageHeader header;
    image::MediaConfig config;   // the settings that will prepare it (the token cap applied)
    image::ImageGeometry geom;   // its size after preparing, its token count
    int64_t memory = 0;          // bound of the bytes decoding and preparing it take at the peak
    std::string where;           // "messages[i].content[j]", for errors
};

class MediaLoader {
public:
    // unavailable: why this model takes no images ("" when it does).
    MediaLoader(image::MediaConfig media, MediaLimits limits, std::string unavailable);

    // The server's resolver for one request's render: each image part is read as far as its
    // header and appended to `out`; the per-request limits (count, memory) are checked as they
    // add up. stored: the images a stored conversation names (kimi-stored-image:HEX), null:
    // none. Throws ImageError.
    chat::ImageResolver probe_resolver(std::vector<PendingImage>& out, const StoredImages* stored = nullptr) const;
    // Decodes and prepares a pending image. Throws ImageError.
    PromptImage load(const PendingImage& p) const;

    // The terminal commands' resolver: each image part probed and loaded at once.
    chat::ImageResolver resolver(std::vector<PromptImage>& out) const;
    // Encoded bytes → a pending image (its header read, its limits checked); → a prepared one.
    PendingImage probe_bytes(std::vector<uint8_t> bytes, const std::string& where) const;
    PromptImage load_bytes(std::vector<uint8_t> bytes, const std::string& where) const {
        return load(probe_bytes(std::move(bytes), where));
    }

    const image::MediaConfig& media_config() const { return media_; }   // with the token cap applied
    const MediaLimits& limits() const { return limits_; }

private:
    PendingImage probe_part(const nlohmann::ordered_json& part, const std::string& where,
                            const StoredImages* stored) const;
    void check_count(size_t images_so_far, const std::string& where) const;   // --limit-mm-per-prompt

    image::MediaConfig media_;
    MediaLimits limits_;
    std::string unavailable_;
};

}   // namespace kimi::server
