// The files of the chat page and the JavaScript libraries it uses (Debian's libjs-marked and
// node-dompurify), embedded in the binary at build time (cmake/embed_assets.cmake), so a fresh
// `make serve` serves them offline with nothing beside the binary. Served under /web/ with a
// Content-Security-Policy that allows scripts, styles and connections from this origin only.
#pragma once
#include <cstddef>
#include <string_view>

namespace kimi::server {

struct WebAsset {
    const char* path;           // URL path, e.g. "/web/vendor/marked.min.js"
    const char* content_type;   // e.g. "text/javascript; charset=utf-8"
    const unsigned char* data;
    size_t size;
};

extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

// The asset at this URL path, or null.
inline const WebAsset* find_web_asset(std::string_view path) {
    for (size_t i = 0; i < kWebAssetCount; ++i)
        if (path == kWebAssets[i].path) return &kWebAssets[i];
    return nullptr;
}

// The Content-Security-Policy every page and asset is sent with: nothing inline runs, nothing
// loads from another origin; images may be data:/blob: URLs (attached images).
inline constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}   // namespace kimi::server
