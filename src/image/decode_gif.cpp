// GIF → DecodedImage over giflib: the first frame only, as Pillow 9.4's GifImagePlugin opens it:
// mode P with the frame's palette (local, else global), or L when that palette is exactly the
// grey ramp (i, i, i) or absent; the frame drawn at its offset on the logical screen (grown to
// fit the frame, as Pillow does), the rest filled with the transparent index, else 0; the
// transparent index of the preceding graphic control extension → palette alpha 0.
#include <gif_lib.h>

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

}   // namespace

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
