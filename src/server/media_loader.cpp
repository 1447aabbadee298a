// MediaLoader implementation (see media_loader.h).
#include "server/media_loader.h"

#include "image/decode.h"

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

PromptImage MediaLoader::load_bytes(const std::vector<uint8_t>& bytes, const std::string& where) const {
    if (!unavailable_.empty()) throw ImageError(unavailable_);
    PromptImage p;
    try {
        const image::DecodedImage decoded = image::decode_image(bytes);
        // the padding to whole cells can put an image a row or column of cells over the cap
        image::MediaConfig m = media_;
        while (limits_.max_image_tokens > 0 && m.in_patch_limit > 4 &&
               image::image_geometry(decoded.width, decoded.height, m).n_tokens > limits_.max_image_tokens)
            m.in_patch_limit = m.in_patch_limit * 3 / 4;
        p.img = image::prepare_image(decoded, m);
    } catch (const Error& e) {
        throw ImageError(where + ": " + e.what());
    }
    p.hash = image::content_hash(p.img);
    return p;
}

PromptImage MediaLoader::load_part(const J& part, const std::string& where) const {
    if (!unavailable_.empty()) throw ImageError(unavailable_);
    const std::string url = part_url(part, where);
    std::vector<uint8_t> bytes;
    try {
        bytes = image::bytes_from_url(url, limits_.source);
    } catch (const Error& e) {
        throw ImageError(where + ": " + e.what());
    }
    return load_bytes(bytes, where);
}

chat::ImageResolver MediaLoader::resolver(std::vector<PromptImage>& out) const {
    return [this, &out](const J& part, const std::string& where) {
        if (int64_t(out.size()) >= limits_.images_per_prompt)
            throw ImageError(where + ": more than " + std::to_string(limits_.images_per_prompt) +
                             " images in one prompt (--limit-mm-per-prompt image=N)");
        out.push_back(load_part(part, where));
        const image::ImageGeometry& g = out.back().img.geom;
        return chat::ImagePrompt{g.width, g.height, g.n_tokens};
    };
}

}   // namespace kimi::server
