// EXIF orientation for JPEG: a small bounded TIFF/IFD0 reader for tag 0x0112 in an APP1
// "Exif\0\0" payload, and the 8 orientations applied as PIL.ImageOps.exif_transpose does.
#include <cstring>
#include <vector>

#include "image/decode_internal.h"

namespace kimi::image::detail {

namespace {

struct TiffReader {
    std::span<const uint8_t> data;
    bool little = true;

    bool u16(size_t off, uint32_t& out) const {
        if (off > data.size() || data.size() - off < 2) return false;
        out = little ? (data[off] | data[off + 1] << 8) : (data[off] << 8 | data[off + 1]);
        return true;
    }
    bool u32(size_t off, uint32_t& out) const {
        if (off > data.size() || data.size() - off < 4) return false;
        const uint32_t b0 = data[off], b1 = data[off + 1], b2 = data[off + 2], b3 = data[off + 3];
        out = little ? (b0 | b1 << 8 | b2 << 16 | b3 << 24) : (b0 << 24 | b1 << 16 | b2 << 8 | b3);
        return true;
    }
};

}   // namespace

int exif_orientation(std::span<const uint8_t> app1) {
    // Pillow strips the "Exif\0\0" prefix and reads a TIFF header: II*\0 or MM\0*, then IFD0.
    if (app1.size() < 6 || std::memcmp(app1.data(), "Exif\0\0", 6) != 0) return 1;
    TiffReader r{app1.subspan(6)};
    if (r.data.size() < 8) return 1;
    if (std::memcmp(r.data.data(), "II*\0", 4) == 0) {
        r.little = true;
    } else if (std::memcmp(r.data.data(), "MM\0*", 4) == 0) {
        r.little = false;
    } else {
        return 1;
    }
    uint32_t ifd = 0, count = 0;
    if (!r.u32(4, ifd) || !r.u16(ifd, count)) return 1;
    int orientation = 1;
    // Entries are read until the data runs out (Pillow keeps those read before a truncation);
    // a later duplicate of the tag overrides an earlier one, as in Pillow's dict.
    for (uint32_t i = 0; i < count; ++i) {
        const size_t entry = static_cast<size_t>(ifd) + 2 + static_cast<size_t>(i) * 12;
        uint32_t tag = 0, type = 0, n = 0;
        if (!r.u16(entry, tag) || !r.u16(entry + 2, type) || !r.u32(entry + 4, n) || entry + 12 > r.data.size()) break;
        if (tag != 0x0112 || n != 1) continue;
        uint32_t value = 0;
        switch (type) {
            case 1:   // BYTE
            case 6:   // SBYTE
                value = r.data[entry + 8];
                break;
            case 3:   // SHORT
            case 8:   // SSHORT
                r.u16(entry + 8, value);
                break;
            case 4:   // LONG
            case 9:   // SLONG
                r.u32(entry + 8, value);
                break;
            default: continue;
        }
        orientation = (value >= 1 && value <= 8) ? static_cast<int>(value) : 1;
    }
    return orientation;
}

void apply_orientation(DecodedImage& image, int orientation) {
    if (orientation < 2 || orientation > 8) return;
    const size_t w = static_cast<size_t>(image.width), h = static_cast<size_t>(image.height);
    const size_t bpp = static_cast<size_t>(bytes_per_pixel(image.mode));
    const bool swap = orientation >= 5;   // TRANSPOSE, ROTATE_270, TRANSVERSE, ROTATE_90 swap the sides
    const size_t ow = swap ? h : w, oh = swap ? w : h;
    std::vector<uint8_t> out(image.pixels.size());
    for (size_t y = 0; y < oh; ++y) {
        for (size_t x = 0; x < ow; ++x) {
            size_t sx = 0, sy = 0;   // the source pixel of output (x, y)
            switch (orientation) {
                case 2: sx = w - 1 - x, sy = y; break;           // FLIP_LEFT_RIGHT
                case 3: sx = w - 1 - x, sy = h - 1 - y; break;   // ROTATE_180
                case 4: sx = x, sy = h - 1 - y; break;           // FLIP_TOP_BOTTOM
                case 5: sx = y, sy = x; break;                   // TRANSPOSE
                case 6: sx = y, sy = h - 1 - x; break;           // ROTATE_270 (clockwise)
                case 7: sx = w - 1 - y, sy = h - 1 - x; break;   // TRANSVERSE
                case 8: sx = w - 1 - y, sy = x; break;           // ROTATE_90 (counter-clockwise)
                default: break;
            }
            std::memcpy(&out[(y * ow + x) * bpp], &image.pixels[(sy * w + sx) * bpp], bpp);
        }
    }
    image.pixels = std::move(out);
    image.width = static_cast<int32_t>(ow);
    image.height = static_cast<int32_t>(oh);
}

void place_oriented_row(const uint8_t* row, size_t y, size_t w, size_t h, size_t bpp, int orientation, uint8_t* out) {
    const size_t ow = orientation >= 5 && orientation <= 8 ? h : w;
    // Where source pixel (x, y) lands: the inverse of apply_orientation's source mapping.
    for (size_t x = 0; x < w; ++x) {
        size_t ox = x, oy = y;
        switch (orientation) {
            case 2: ox = w - 1 - x; break;
            case 3: ox = w - 1 - x, oy = h - 1 - y; break;
            case 4: oy = h - 1 - y; break;
            case 5: ox = y, oy = x; break;
            case 6: ox = h - 1 - y, oy = x; break;
            case 7: ox = h - 1 - y, oy = w - 1 - x; break;
            case 8: ox = y, oy = w - 1 - x; break;
            default: break;
        }
        std::memcpy(out + (oy * ow + ox) * bpp, row + x * bpp, bpp);
    }
}

}   // namespace kimi::image::detail
