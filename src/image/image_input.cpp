// Image sources, the model's preprocessing settings and the content hash (see image_input.h).
#include "image/image_input.h"

#include <cctype>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace kimi::image {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.compare(0, std::strlen(p), p) == 0; }

// %XX escapes of a file:// URL path.
std::string percent_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(uint8_t(s[i + 1])) && std::isxdigit(uint8_t(s[i + 2]))) {
            out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

uint64_t mix(uint64_t h, uint64_t v) {   // splitmix64's finalizer over h ^ v
    uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}   // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path, size_t max_bytes) {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(st)) throw Error(path + ": no such image file");
    if (!std::filesystem::is_regular_file(st)) throw Error(path + ": not a regular file");
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) throw Error(path + ": cannot read");
    if (size > max_bytes)
        throw Error(path + ": the image file is " + std::to_string(size) + " bytes, more than the limit of " +
                    std::to_string(max_bytes));
    std::ifstream f(path, std::ios::binary);
    auto out = std::vector<uint8_t>(size_t(size));
    if (!f || !f.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size())))
        throw Error(path + ": cannot read");
    return out;
}

std::vector<uint8_t> bytes_from_url(const std::string& url, const SourcePolicy& policy) {
    if (starts_with(url, "data:")) {
        const size_t comma = url.find(',');
        if (comma == std::string::npos) throw Error("a data: URL needs a ',' before its data");
        const std::string meta = url.substr(5, comma - 5);
        if (meta.size() < 7 || meta.compare(meta.size() - 7, 7, ";base64") != 0)
            throw Error("a data: image URL must be base64 (data:image/png;base64,...)");
        if (!meta.empty() && !starts_with(meta, "image/") && !starts_with(meta, ";"))
            throw Error("a data: URL of type '" + meta.substr(0, meta.size() - 7) + "' is not an image");
        const std::string_view b64 = std::string_view(url).substr(comma + 1);
        if (b64.size() / 4 * 3 > policy.max_bytes)
            throw Error("the image is larger than the limit of " + std::to_string(policy.max_bytes) + " bytes");
        const auto raw = base64_decode(b64);
        if (!raw) throw Error("the data: URL's base64 is invalid");
        return std::vector<uint8_t>(raw->begin(), raw->end());
    }
    if (starts_with(url, "file://")) {
        if (policy.allowed_local_media_path.empty())
            throw Error("file:// image URLs are refused (the server was not started with --allowed-local-media-path)");
        std::string path = percent_decode(url.substr(7));
        if (starts_with(path, "localhost/")) path = path.substr(9);
        if (!starts_with(path, "/")) throw Error("a file:// URL needs an absolute path");
        std::error_code ec;
        const auto real = std::filesystem::weakly_canonical(path, ec);
        const auto root = std::filesystem::weakly_canonical(policy.allowed_local_media_path, ec);
        const auto rel = real.lexically_relative(root);
        if (ec || rel.empty() || starts_with(rel.string(), ".."))
            throw Error("file:// URL '" + url + "' is outside the allowed local media path");
        return read_file_bytes(real.string(), policy.max_bytes);
    }
    if (starts_with(url, "http://") || starts_with(url, "https://"))
        throw Error("this server does not fetch URLs: send the image inline as a data: URL (base64)");
    throw Error("unsupported image URL (expected a data: URL" +
                std::string(policy.allowed_local_media_path.empty() ? "" : " or a file:// URL") + ")");
}

MediaConfig load_media_config(const std::string& model_dir) {
    const std::string path = model_dir + "/preprocessor_config.json";
    if (!std::filesystem::exists(path)) return MediaConfig{};
    check_regular_file(path, /*missing_ok=*/false);
    std::ifstream f(path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": invalid JSON: " + e.what());
    }
    return parse_media_config(j, path);
}

uint64_t content_hash(const PreparedImage& img) {
    const ImageGeometry& g = img.geom;
    uint64_t h = 0x6a09e667f3bcc908ull;
    for (int64_t v : {int64_t(g.width), int64_t(g.height), int64_t(g.new_width), int64_t(g.new_height),
                      int64_t(g.pad_width), int64_t(g.pad_height)})
        h = mix(h, uint64_t(v));
    const size_t n = img.rgb.size();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, img.rgb.data() + i, 8);
        h = mix(h, w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, img.rgb.data() + i, n - i);
    return mix(h, tail ^ n);
}

}   // namespace kimi::image
