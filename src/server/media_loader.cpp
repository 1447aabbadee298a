// MediaLoader implementation (see media_loader.h).
#include "server/media_loader.h"

#include "core/human_bytes.h"
#include "image/decode.h"
#include "image/image_key.h"

namespace kimi::server {

namespace {

using J = nlohmann::ordered_json;

// The resize budget that keeps an image at or under `max_tokens` merged tokens: the
// checkpoint's in_patch_limit lowered to 4 patches a token (the padding to whole 2×2 cells
// can add a row or column of cells: checked again per image).
image::MediaConfig capped(image::MediaConfig m, int64_t max_tokens) {
    if (max_tokens <= 0) return m;
    const int64_t per_token = int64_t(m.merge_kernel_size) * m.merge_kernel_size;
    m.in_patch_limit = std::max<int64_t>(1, std::min(m.in_patch_limit, max_tokens * per_token));
    return m;
}

// The URL of an image part: image_url.url, image_url as a string, or image (a URL string).
std::string part_url(const J& part, const std::string& where) {
    if (part.is_string()) return part.get<std::string>();
    const J* u = nullptr;
    if (auto it = part.find("image_url"); it != part.end())
        u = &*it;
    else if (auto it2 = part.find("image"); it2 != part.end())
        u = &*it2;
    if (u && u->is_object()) {
        auto url = u->find("url");
        if (url != u->end() && url->is_string()) return url->get<std::string>();
    }
    if (u && u->is_string()) return u->get<std::string>();
    throw ImageError(where + ": an image part needs image_url.url (a data: URL)");
}

}   // namespace

MediaLoader::MediaLoader(image::MediaConfig media, MediaLimits limits, std::string unavailable)
    : media_(capped(std::move(media), limits.max_image_tokens)),
      limits_(std::move(limits)),
      unavailable_(std::move(unavailable)) {}

PendingImage MediaLoader::probe_bytes(std::vector<uint8_t> bytes, const std::string& where) const {
    if (!unavailable_.empty()) throw ImageError(unavailable_);
    PendingImage p;
    p.where = where;
    try {
        image::DecodeLimits dl;
        dl.max_pixels = limits_.max_image_pixels;
        p.header = image::probe_image(bytes, dl);
    } catch (const Error& e) {
        const std::string what = e.what();
        const bool pixels = what.find("exceeds the limit of") != std::string::npos;
        throw ImageError(where + ": " + what + (pixels ? " (--max-image-pixels)" : ""));
    }
    // the padding to whole cells can put an image a row or column of cells over the cap
    p.config = media_;
    while (limits_.max_image_tokens > 0 && p.config.in_patch_limit > 4 &&
           image::image_geometry(p.header.width, p.header.height, p.config).n_tokens > limits_.max_image_tokens)
        p.config.in_patch_limit = p.config.in_patch_limit * 3 / 4;
    p.geom = image::image_geometry(p.header.width, p.header.height, p.config);
    p.memory = p.header.decode_bytes + image::prepare_bytes(p.header, p.config) + int64_t(bytes.size());
    p.bytes = std::move(bytes);
    return p;
}

PromptImage MediaLoader::load(const PendingImage& p) const {
    PromptImage out;
    try {
        image::DecodeLimits dl;
        dl.max_pixels = limits_.max_image_pixels;
        // decode_image probes again and refuses pixels of another size than the header's
        out.img = image::prepare_image(image::decode_image(p.bytes, dl), p.config);
    } catch (const Error& e) {
        throw ImageError(p.where + ": " + e.what());
    }
    out.key = image::image_key(out.img, p.config);
    return out;
}

void MediaLoader::check_count(size_t images_so_far, const std::string& where) const {
    if (int64_t(images_so_far) >= limits_.images_per_prompt)
        throw ImageError(where + ": more than " + std::to_string(limits_.images_per_prompt) +
                         " images in one prompt (--limit-mm-per-prompt image=N)");
}

PendingImage MediaLoader::probe_part(const J& part, const std::string& where, const StoredImages* stored) const {
    if (!unavailable_.empty()) throw ImageError(unavailable_);
    const std::string url = part_url(part, where);
    std::vector<uint8_t> bytes;
    if (url.rfind(kStoredImageScheme, 0) == 0) {   // an image of previous_response_id's conversation
        const auto it = stored ? stored->find(url.substr(std::string_view(kStoredImageScheme).size()))
                               : StoredImages::const_iterator();
        if (!stored || it == stored->end())
            throw ImageError(where + ": " + url.substr(0, 100) + " names no image of the stored conversation");
        return probe_bytes(it->second->bytes, where);
    }
    try {
        bytes = image::bytes_from_url(url, limits_.source);
    } catch (const Error& e) {
        throw ImageError(where + ": " + e.what());
    }
    return probe_bytes(std::move(bytes), where);
}

chat::ImageResolver MediaLoader::probe_resolver(std::vector<PendingImage>& out, const StoredImages* stored) const {
    return [this, &out, stored](const J& part, const std::string& where) {
        check_count(out.size(), where);
        PendingImage p = probe_part(part, where, stored);
        int64_t total = p.memory;
        for (const PendingImage& q : out) total += q.memory;
        if (total > limits_.request_bytes)
            throw ImageError(where + ": decoding this request's images would take " + human_bytes(total) +
                             ", more than the limit of " + human_bytes(limits_.request_bytes) +
                             " (--mm-request-memory)");
        out.push_back(std::move(p));
        const image::ImageGeometry& g = out.back().geom;
        return chat::ImagePrompt{g.width, g.height, g.n_tokens};
    };
}

chat::ImageResolver MediaLoader::resolver(std::vector<PromptImage>& out) const {
    return [this, &out](const J& part, const std::string& where) {
        check_count(out.size(), where);
        out.push_back(load(probe_part(part, where, nullptr)));
        const image::ImageGeometry& g = out.back().img.geom;
        return chat::ImagePrompt{g.width, g.height, g.n_tokens};
    };
}

}   // namespace kimi::server
