// How an image enters the engine: its bytes from an OpenAI image_url (a base64 data: URL, or a
// file:// URL under the one directory the server allows; http(s) URLs are refused: the server
// fetches nothing) or from a file (CLI), the model's preprocessing settings, and a prepared
// image with the key that names it in the prefix and encoder caches (image_key.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "image/image_key.h"
#include "image/preprocess.h"

namespace kimi::image {

struct SourcePolicy {
    std::string allowed_local_media_path;   // "" (default): file:// URLs are refused
    size_t max_bytes = size_t(64) << 20;    // encoded image size limit
};

// The encoded bytes an image_url names. Throws kimi::Error with a one-line reason (a bad or
// unsupported URL, a path outside the allowed directory, a missing or oversized file).
std::vector<uint8_t> bytes_from_url(const std::string& url, const SourcePolicy& policy);
std::vector<uint8_t> read_file_bytes(const std::string& path, size_t max_bytes);

// <model_dir>/preprocessor_config.json, or the published defaults when there is none.
MediaConfig load_media_config(const std::string& model_dir);

// One image of a prompt, ready for the tower.
struct PromptImage {
    PreparedImage img;
    ImageKey key;   // image_key(img, the settings that prepared it)
};

}   // namespace kimi::image
