// GIF → DecodedImage over giflib: the first frame only, as Pillow 9.4's GifImagePlugin opens it:
// mode P with the frame's palette (local, else global), or L when that palette is exactly the
// grey ramp (i, i, i) or absent; the frame drawn at its offset on the logical screen (grown to
// fit the frame, as Pillow does), the rest filled with the transparent index, else 0; the
// transparent index of the preceding graphic control extension → palette alpha 0. Only the first
// frame is read: giflib is driven record by record (never DGifSlurp), so later frames cost nothing.
// probe_gif walks the same records up to the first image descriptor without giflib.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/decode_internal.h"

namespace kimi::image::detail {

namespace {

struct GifSource {
    std::span<const uint8_t> bytes;
    size_t pos = 0;
};

int read_fn(GifFileType* gif, GifByteType* out, int n) {
    auto* src = static_cast<GifSource*>(gif->UserData);
    if (n <= 0) return 0;
    const size_t want = static_cast<size_t>(n);
    const size_t take = want < src->bytes.size() - src->pos ? want : src->bytes.size() - src->pos;
    if (take) std::memcpy(out, src->bytes.data() + src->pos, take);
    src->pos += take;
    return static_cast<int>(take);
}

struct GifGuard {
    GifFileType* gif = nullptr;
    ~GifGuard() {
        int err = 0;
        if (gif) DGifCloseFile(gif, &err);
    }
};

[[noreturn]] void fail(const char* what, int code) {
    const char* reason = GifErrorString(code);
    throw Error(std::string("gif: ") + what + ": " + (reason ? reason : "error"));
}

// Pillow's _is_palette_needed: false when entry i is (i, i, i) for every entry.
bool palette_needed(const ColorMapObject* map) {
    for (int i = 0; i < map->ColorCount; ++i) {
        const GifColorType& c = map->Colors[i];
        if (!(c.Red == i && c.Green == i && c.Blue == i)) return true;
    }
    return false;
}

// Pillow's _is_palette_needed on raw colour table bytes (r, g, b per entry).
bool raw_palette_needed(const uint8_t* table, int count) {
    for (int i = 0; i < count; ++i)
        if (!(table[3 * i] == i && table[3 * i + 1] == i && table[3 * i + 2] == i)) return true;
    return false;
}

uint32_t le16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8; }

}   // namespace

ImageHeader probe_gif(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    // Header (6), logical screen descriptor (7), global colour table; as giflib's DGifOpen reads them.
    const size_t n = bytes.size();
    const uint8_t* d = bytes.data();
    if (n < 13) throw Error("gif: cannot read the header: truncated file");
    const int64_t screen_w = le16(d + 6), screen_h = le16(d + 8);
    check_dimensions("gif", screen_w, screen_h, limits);
    size_t pos = 13;
    bool palette = false;
    if (d[10] & 0x80) {
        const int count = 1 << ((d[10] & 7) + 1);
        if (n - pos < static_cast<size_t>(3 * count)) throw Error("gif: cannot read the header: truncated file");
        palette = raw_palette_needed(d + pos, count);
        pos += static_cast<size_t>(3 * count);
    }
    // Records up to the first image descriptor: extensions are sub-blocks (size byte, data) up to
    // an empty one; anything but an extension, an image or the trailer is an error for giflib. A
    // graphic control extension with its transparency flag makes decode_gif set a transparent index.
    bool transparency = false;
    for (;;) {
        if (pos >= n) throw Error("gif: cannot read a record: truncated file");
        const uint8_t type = d[pos++];
        if (type == ';') throw Error("gif: the file has no image");
        if (type == '!') {
            if (pos >= n) throw Error("gif: cannot read an extension: truncated file");
            const uint8_t code = d[pos++];
            for (bool first = true;; first = false) {
                if (pos >= n) throw Error("gif: cannot read an extension: truncated file");
                const size_t len = d[pos++];
                if (len == 0) break;
                if (n - pos < len) throw Error("gif: cannot read an extension: truncated file");
                if (first && code == GRAPHICS_EXT_FUNC_CODE && len >= 4 && (d[pos] & 1)) transparency = true;
                pos += len;
            }
            continue;
        }
        if (type != ',') throw Error("gif: cannot read a record: wrong record type");
        break;
    }
    if (n - pos < 9) throw Error("gif: cannot read the image descriptor: truncated file");
    const int64_t left = le16(d + pos), top = le16(d + pos + 2), fw = le16(d + pos + 4), fh = le16(d + pos + 6);
    const uint8_t flags = d[pos + 8];
    pos += 9;
    if (fw <= 0 || fh <= 0) throw Error("gif: invalid frame size");
    if (flags & 0x80) {   // a local colour table replaces the global one
        const int count = 1 << ((flags & 7) + 1);
        if (n - pos < static_cast<size_t>(3 * count))
            throw Error("gif: cannot read the image descriptor: truncated file");
        palette = raw_palette_needed(d + pos, count);
    }
    // Pillow grows the screen to hold a frame that does not fit in it (and so does decode_gif).
    ImageHeader h;
    h.width = static_cast<int32_t>(std::max(screen_w, left + fw));
    h.height = static_cast<int32_t>(std::max(screen_h, top + fh));
    check_dimensions("gif", h.width, h.height, limits);
    h.mode = palette ? PixelMode::kP : PixelMode::kL;
    h.transparency = transparency;
    // The canvas (1 byte per pixel), one frame row, giflib's decoder state (LZW tables of 16 KiB and
    // two colour maps) and the palette: all fixed but the canvas.
    h.decode_bytes = int64_t{h.width} * h.height + fw + 64 * 1024 + kDecodeSlackBytes;
    return h;
}

DecodedImage decode_gif(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    GifSource src{bytes};
    GifGuard guard;
    int err = 0;
    guard.gif = DGifOpen(&src, read_fn, &err);
    if (!guard.gif) fail("cannot read the header", err);
    GifFileType* gif = guard.gif;
    // The screen is checked before anything else is read (a bomb fails here).
    check_dimensions("gif", gif->SWidth, gif->SHeight, limits);
    const ColorMapObject* global = gif->SColorMap && palette_needed(gif->SColorMap) ? gif->SColorMap : nullptr;

    int transparency = -1;
    for (;;) {
        GifRecordType type = UNDEFINED_RECORD_TYPE;
        if (DGifGetRecordType(gif, &type) == GIF_ERROR) fail("cannot read a record", gif->Error);
        if (type == TERMINATE_RECORD_TYPE) throw Error("gif: the file has no image");
        if (type == EXTENSION_RECORD_TYPE) {
            int code = 0;
            GifByteType* ext = nullptr;
            if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) fail("cannot read an extension", gif->Error);
            // Graphic control extension: flags, delay (2), transparent index.
            if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) transparency = ext[4];
            while (ext) {
                if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) fail("cannot read an extension", gif->Error);
            }
            continue;
        }
        if (type == IMAGE_DESC_RECORD_TYPE) break;
    }
    if (DGifGetImageDesc(gif) == GIF_ERROR) fail("cannot read the image descriptor", gif->Error);
    const GifImageDesc& desc = gif->Image;
    if (desc.Width <= 0 || desc.Height <= 0 || desc.Left < 0 || desc.Top < 0) throw Error("gif: invalid frame size");
    const int64_t x1 = static_cast<int64_t>(desc.Left) + desc.Width, y1 = static_cast<int64_t>(desc.Top) + desc.Height;
    const int64_t width = x1 > gif->SWidth ? x1 : gif->SWidth, height = y1 > gif->SHeight ? y1 : gif->SHeight;
    check_dimensions("gif", width, height, limits);

    const ColorMapObject* palette = global;
    if (desc.ColorMap) palette = palette_needed(desc.ColorMap) ? desc.ColorMap : nullptr;

    DecodedImage img;
    img.width = static_cast<int32_t>(width);
    img.height = static_cast<int32_t>(height);
    img.mode = palette ? PixelMode::kP : PixelMode::kL;
    img.pixels.assign(pixel_bytes(img.width, img.height, img.mode), transparency >= 0 ? transparency : 0);

    const size_t fw = static_cast<size_t>(desc.Width), fh = static_cast<size_t>(desc.Height);
    std::vector<GifPixelType> line(fw);
    static constexpr size_t kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
    const int passes = desc.Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; ++pass) {
        const size_t start = desc.Interlace ? kStart[pass] : 0, step = desc.Interlace ? kStep[pass] : 1;
        for (size_t y = start; y < fh; y += step) {
            if (DGifGetLine(gif, line.data(), desc.Width) == GIF_ERROR) fail("cannot decode the image", gif->Error);
            uint8_t* row = img.pixels.data() + (static_cast<size_t>(desc.Top) + y) * static_cast<size_t>(img.width) +
                static_cast<size_t>(desc.Left);
            std::memcpy(row, line.data(), fw);
        }
    }

    if (palette) {
        img.palette.resize(256 * 4);
        for (int i = 0; i < 256; ++i) {
            const bool in_map = i < palette->ColorCount;
            img.palette[4 * i] = in_map ? palette->Colors[i].Red : static_cast<uint8_t>(i);
            img.palette[4 * i + 1] = in_map ? palette->Colors[i].Green : static_cast<uint8_t>(i);
            img.palette[4 * i + 2] = in_map ? palette->Colors[i].Blue : static_cast<uint8_t>(i);
            img.palette[4 * i + 3] = i == transparency ? 0 : 255;
        }
    }
    if (transparency >= 0) {
        img.has_transparency = true;   // Pillow: info["transparency"] = the index (also for mode L)
        img.transparent_value = transparency;
    }
    return img;
}

}   // namespace kimi::image::detail
