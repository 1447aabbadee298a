// Image sources and the model's preprocessing settings (see image_input.h).
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

// %XX escapes of a file:// URL path. A decoded NUL or other control character is refused:
// `ok.png%00/../x.png` would name one file to the checks and another to open().
std::string percent_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(uint8_t(s[i + 1])) && std::isxdigit(uint8_t(s[i + 2]))) {
            out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
        if (uint8_t(out.back()) < 0x20 || uint8_t(out.back()) == 0x7f)
            throw Error("a file:// URL's path must not hold a control character (such as %00)");
    }
    return out;
}

// Whether s starts with the ASCII prefix p, ignoring case (URL schemes, media types).
bool starts_with_nocase(std::string_view s, std::string_view p) {
    if (s.size() < p.size()) return false;
    for (size_t i = 0; i < p.size(); ++i)
        if (std::tolower(uint8_t(s[i])) != std::tolower(uint8_t(p[i]))) return false;
    return true;
}

bool ends_with_nocase(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && starts_with_nocase(s.substr(s.size() - p.size()), p);
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
    // Schemes, the media type and ";base64" are case-insensitive (RFC 3986 3.1, RFC 2397).
    if (starts_with_nocase(url, "data:")) {
        const size_t comma = url.find(',');
        if (comma == std::string::npos) throw Error("a data: URL needs a ',' before its data");
        const std::string meta = url.substr(5, comma - 5);
        if (!ends_with_nocase(meta, ";base64"))
            throw Error("a data: image URL must be base64 (data:image/png;base64,...)");
        if (!starts_with_nocase(meta, "image/") && !starts_with(meta, ";"))
            throw Error("a data: URL of type '" + meta.substr(0, meta.size() - 7) + "' is not an image");
        const std::string_view b64 = std::string_view(url).substr(comma + 1);
        const std::string too_large =
            "the image is larger than the limit of " + std::to_string(policy.max_bytes) + " bytes";
        // why: line breaks take up to 1 byte in 39, so this bound never refuses a wrapped image
        // under the limit; the exact check follows the decode.
        if (b64.size() / 4 * 3 > policy.max_bytes + policy.max_bytes / 16 + 64) throw Error(too_large);
        // Lenient: wrapped lines, the URL-safe alphabet and missing '=' padding are taken.
        const auto raw = base64_decode_lenient(b64);
        if (!raw) throw Error("the data: URL's base64 is invalid");
        if (raw->size() > policy.max_bytes) throw Error(too_large);
        return std::vector<uint8_t>(raw->begin(), raw->end());
    }
    if (starts_with_nocase(url, "file://")) {
        if (policy.allowed_local_media_path.empty())
            throw Error("file:// image URLs are refused (the server was not started with --allowed-local-media-path)");
        std::string path = percent_decode(url.substr(7));   // refuses control characters (%00)
        if (starts_with(path, "localhost/")) path = path.substr(9);
        if (!starts_with(path, "/")) throw Error("a file:// URL needs an absolute path");
        const std::string outside = "file:// URL '" + url + "' is outside the allowed local media path";
        std::error_code ec;
        const auto real = std::filesystem::weakly_canonical(path, ec);   // symlinks resolved
        if (ec) throw Error(outside);
        const auto root = std::filesystem::weakly_canonical(policy.allowed_local_media_path, ec);
        if (ec) throw Error(outside);
        // Outside when the relative path's first component is "..": a file named "..x.png" in
        // the folder is inside.
        const auto rel = real.lexically_relative(root);
        if (rel.empty() || *rel.begin() == "..") throw Error(outside);
        return read_file_bytes(real.string(), policy.max_bytes);
    }
    if (starts_with_nocase(url, "http://") || starts_with_nocase(url, "https://"))
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

}   // namespace kimi::image
