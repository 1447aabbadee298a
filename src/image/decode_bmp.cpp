// BMP → DecodedImage, hand-written after Pillow 9.4's BmpImagePlugin: header sizes 12/40/64/108/124;
// 1/4/8-bit palettes (P, or "1"/L when the palette is black/white or the grey ramp, with Pillow's
// raw unpackers), 16-bit (5-5-5 and BITFIELDS 5-6-5), 24-bit and 32-bit BI_RGB (RGB: the fourth
// byte is ignored) and the BITFIELDS layouts Pillow accepts (RGB or RGBA); bottom-up and top-down.
// RLE4/RLE8 are rejected with an Error (Pillow decodes them).
#include <cstring>
#include <string>

#include "core/error.h"
#include "image/decode_internal.h"

namespace kimi::image::detail {

namespace {

constexpr uint32_t kRaw = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3;

// Pillow's rawmodes for BMP rows.
enum class Raw { k1, kP1, kP4, kP8, kL, kBGR15, kBGR16, kBGR, kBGRX, kXBGR, kABGR, kRGBA, kBGRA };

uint32_t le16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8; }
uint32_t le32(const uint8_t* p) { return le16(p) | le16(p + 2) << 16; }

// Bytes the unpacker needs for `w` pixels (Pillow's state->bytes).
int64_t raw_row_bytes(Raw raw, int64_t w) {
    switch (raw) {
        case Raw::k1:
        case Raw::kP1: return (w + 7) / 8;
        case Raw::kP4: return (w + 1) / 2;
        case Raw::kP8:
        case Raw::kL: return w;
        case Raw::kBGR15:
        case Raw::kBGR16: return 2 * w;
        case Raw::kBGR: return 3 * w;
        default: return 4 * w;
    }
}

void unpack_row(Raw raw, const uint8_t* in, uint8_t* out, size_t w) {
    switch (raw) {
        case Raw::k1:
            for (size_t x = 0; x < w; ++x) out[x] = (in[x >> 3] >> (7 - (x & 7))) & 1 ? 255 : 0;
            break;
        case Raw::kP1:
            for (size_t x = 0; x < w; ++x) out[x] = (in[x >> 3] >> (7 - (x & 7))) & 1;
            break;
        case Raw::kP4:
            for (size_t x = 0; x < w; ++x) out[x] = (x & 1) ? in[x >> 1] & 0x0f : in[x >> 1] >> 4;
            break;
        case Raw::kP8:
        case Raw::kL: std::memcpy(out, in, w); break;
        case Raw::kBGR15:
            for (size_t x = 0; x < w; ++x) {
                const uint32_t p = le16(in + 2 * x);
                out[3 * x] = static_cast<uint8_t>(((p >> 10) & 31) * 255 / 31);
                out[3 * x + 1] = static_cast<uint8_t>(((p >> 5) & 31) * 255 / 31);
                out[3 * x + 2] = static_cast<uint8_t>((p & 31) * 255 / 31);
            }
            break;
        case Raw::kBGR16:
            for (size_t x = 0; x < w; ++x) {
                const uint32_t p = le16(in + 2 * x);
                out[3 * x] = static_cast<uint8_t>(((p >> 11) & 31) * 255 / 31);
                out[3 * x + 1] = static_cast<uint8_t>(((p >> 5) & 63) * 255 / 63);
                out[3 * x + 2] = static_cast<uint8_t>((p & 31) * 255 / 31);
            }
            break;
        case Raw::kBGR:
            for (size_t x = 0; x < w; ++x) {
                out[3 * x] = in[3 * x + 2], out[3 * x + 1] = in[3 * x + 1], out[3 * x + 2] = in[3 * x];
            }
            break;
        case Raw::kBGRX:
            for (size_t x = 0; x < w; ++x) {
                out[3 * x] = in[4 * x + 2], out[3 * x + 1] = in[4 * x + 1], out[3 * x + 2] = in[4 * x];
            }
            break;
        case Raw::kXBGR:
            for (size_t x = 0; x < w; ++x) {
                out[3 * x] = in[4 * x + 3], out[3 * x + 1] = in[4 * x + 2], out[3 * x + 2] = in[4 * x + 1];
            }
            break;
        case Raw::kABGR:
            for (size_t x = 0; x < w; ++x) {
                out[4 * x] = in[4 * x + 3], out[4 * x + 1] = in[4 * x + 2], out[4 * x + 2] = in[4 * x + 1];
                out[4 * x + 3] = in[4 * x];
            }
            break;
        case Raw::kRGBA: std::memcpy(out, in, 4 * w); break;
        case Raw::kBGRA:
            for (size_t x = 0; x < w; ++x) {
                out[4 * x] = in[4 * x + 2], out[4 * x + 1] = in[4 * x + 1], out[4 * x + 2] = in[4 * x];
                out[4 * x + 3] = in[4 * x + 3];
            }
            break;
    }
}

struct Masks {
    uint32_t r, g, b, a;
    bool operator==(const Masks&) const = default;
};

// Everything the header says, checked up to the pixel data's size: what decode_bmp allocates and
// reads (probe_bmp stops here).
struct BmpLayout {
    int64_t width = 0, height = 0;
    PixelMode mode = PixelMode::kRGB;
    Raw raw = Raw::kBGR;
    bool top_down = false;
    const uint8_t* palette = nullptr;   // BGR(X) entries of palette_padding bytes (mode P only)
    uint32_t colors = 0;
    size_t palette_padding = 3;
    int64_t stride = 0;
    uint64_t start = 0;   // offset of the first stored row
};

// The raw layout (and mode) that a BI_BITFIELDS header's channel masks name.
void bitfields_layout(uint32_t bits, const Masks& masks, Raw& raw, PixelMode& mode) {
    const Masks rgb{masks.r, masks.g, masks.b, 0};
    if (bits == 32 && masks == Masks{0xff0000, 0xff00, 0xff, 0}) {
        raw = Raw::kBGRX;
    } else if (bits == 32 && masks == Masks{0xff000000, 0xff0000, 0xff00, 0}) {
        raw = Raw::kXBGR;
    } else if (bits == 32 && masks == Masks{0xff000000, 0xff0000, 0xff00, 0xff}) {
        raw = Raw::kABGR, mode = PixelMode::kRGBA;
    } else if (bits == 32 && masks == Masks{0xff, 0xff00, 0xff0000, 0xff000000}) {
        raw = Raw::kRGBA, mode = PixelMode::kRGBA;
    } else if (bits == 32 && (masks == Masks{0xff0000, 0xff00, 0xff, 0xff000000} || masks == Masks{0, 0, 0, 0})) {
        raw = Raw::kBGRA, mode = PixelMode::kRGBA;
    } else if (bits == 24 && rgb == Masks{0xff0000, 0xff00, 0xff, 0}) {
        raw = Raw::kBGR;
    } else if (bits == 16 && rgb == Masks{0xf800, 0x7e0, 0x1f, 0}) {
        raw = Raw::kBGR16;
    } else if (bits == 16 && rgb == Masks{0x7c00, 0x3e0, 0x1f, 0}) {
        raw = Raw::kBGR15;
    } else {
        throw Error("bmp: unsupported bitfields layout");
    }
}

// The palette of a mode-P image: `colors` entries from `pos` (moved past them).
void read_palette(std::span<const uint8_t> bytes, uint32_t colors, size_t& pos, BmpLayout& l) {
    const size_t size = bytes.size();
    if (colors == 0 || colors > 256) throw Error("bmp: unsupported palette size (" + std::to_string(colors) + ")");
    if ((size - pos) / l.palette_padding < colors) throw Error("bmp: truncated palette");
    l.palette = bytes.data() + pos;
    l.colors = colors;
    pos += l.palette_padding * colors;
    // Pillow drops a black/white (2 colours) or grey-ramp palette: mode "1" / L, read as such.
    bool grey = true;
    for (uint32_t i = 0; i < colors && grey; ++i) {
        const uint8_t v = colors == 2 ? (i ? 255 : 0) : static_cast<uint8_t>(i);
        const uint8_t* e = l.palette + i * l.palette_padding;
        grey = e[0] == v && e[1] == v && e[2] == v;
    }
    if (grey) {
        l.mode = colors == 2 ? PixelMode::k1 : PixelMode::kL;
        l.raw = colors == 2 ? Raw::k1 : Raw::kL;
    }
}

BmpLayout parse_bmp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    const size_t size = bytes.size();
    const uint8_t* d = bytes.data();
    if (size < 18) throw Error("bmp: truncated file header");
    uint64_t offset = le32(d + 10);
    const uint32_t header_size = le32(d + 14);
    if (header_size != 12 && header_size != 40 && header_size != 64 && header_size != 108 && header_size != 124)
        throw Error("bmp: unsupported header type (" + std::to_string(header_size) + ")");
    if (size < 14 + static_cast<size_t>(header_size)) throw Error("bmp: truncated info header");
    const uint8_t* h = d + 18;   // Pillow's header_data: the info header after its size field
    size_t pos = 14 + header_size;

    BmpLayout l;
    int64_t& width = l.width;
    int64_t& height = l.height;
    uint32_t bits = 0, compression = kRaw, colors = 0;
    Masks masks{0, 0, 0, 0};
    if (header_size == 12) {
        width = le16(h), height = le16(h + 2), bits = le16(h + 6);
    } else {
        l.top_down = h[7] == 0xff;   // Pillow's test for a negative height
        width = le32(h);
        height = l.top_down ? (int64_t{1} << 32) - le32(h + 4) : le32(h + 4);
        bits = le16(h + 10);
        compression = le32(h + 12);
        colors = le32(h + 28);
        l.palette_padding = 4;
        if (compression == kBitfields) {
            if (header_size - 4 >= 52) {
                masks = {le32(h + 36), le32(h + 40), le32(h + 44), le32(h + 48)};
            } else {
                if (size - pos < 12) throw Error("bmp: truncated bitfield masks");
                masks = {le32(d + pos), le32(d + pos + 4), le32(d + pos + 8), 0};
                pos += 12;
            }
        }
    }
    if (colors == 0) colors = bits < 32 ? 1u << bits : 0;
    if (offset == 14 + header_size && bits <= 8) offset += 4 * static_cast<uint64_t>(colors);

    PixelMode& mode = l.mode;
    Raw& raw = l.raw;
    switch (bits) {
        case 1: mode = PixelMode::kP, raw = Raw::kP1; break;
        case 4: mode = PixelMode::kP, raw = Raw::kP4; break;
        case 8: mode = PixelMode::kP, raw = Raw::kP8; break;
        case 16: raw = Raw::kBGR15; break;
        case 24: raw = Raw::kBGR; break;
        case 32: raw = Raw::kBGRX; break;
        default: throw Error("bmp: unsupported pixel depth (" + std::to_string(bits) + ")");
    }
    if (compression == kBitfields) {
        bitfields_layout(bits, masks, raw, mode);
    } else if (compression == kRle8 || compression == kRle4) {
        throw Error("bmp: RLE compression is not supported");
    } else if (compression != kRaw) {
        throw Error("bmp: unsupported compression (" + std::to_string(compression) + ")");
    }
    check_dimensions("bmp", width, height, limits);

    if (mode == PixelMode::kP) read_palette(bytes, colors, pos, l);

    // Rows of `stride` bytes from the data offset (the end of the palette when it is 0); the last
    // row needs only the bytes the unpacker reads, as in Pillow's raw decoder.
    l.stride = ((width * bits + 31) >> 3) & ~int64_t{3};
    const int64_t row_bytes = raw_row_bytes(raw, width);
    if (l.stride < row_bytes) throw Error("bmp: row stride too small for the pixel layout");
    l.start = offset ? offset : pos;
    const uint64_t needed = static_cast<uint64_t>((height - 1) * l.stride + row_bytes);
    if (l.start > size || size - l.start < needed) throw Error("bmp: truncated pixel data");
    return l;
}

}   // namespace

ImageHeader probe_bmp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    const BmpLayout l = parse_bmp(bytes, limits);
    ImageHeader h;
    h.width = static_cast<int32_t>(l.width);
    h.height = static_cast<int32_t>(l.height);
    h.mode = l.mode;
    h.transparency = false;
    // The pixels and the palette; the rows are unpacked straight from the input.
    h.decode_bytes = l.width * l.height * bytes_per_pixel(l.mode) + 1024 + kDecodeSlackBytes;
    return h;
}

DecodedImage decode_bmp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    const BmpLayout l = parse_bmp(bytes, limits);
    DecodedImage img;
    img.width = static_cast<int32_t>(l.width);
    img.height = static_cast<int32_t>(l.height);
    img.mode = l.mode;
    if (l.mode == PixelMode::kP) {
        img.palette.resize(256 * 4);
        for (uint32_t i = 0; i < 256; ++i) {   // BGR(X) entries; past them Pillow's ramp (i, i, i)
            uint8_t* out = &img.palette[4 * i];
            if (i < l.colors) {
                const uint8_t* e = l.palette + i * l.palette_padding;
                out[0] = e[2], out[1] = e[1], out[2] = e[0];
            } else {
                out[0] = out[1] = out[2] = static_cast<uint8_t>(i);
            }
            out[3] = 255;
        }
    }
    img.pixels.resize(pixel_bytes(img.width, img.height, img.mode));
    const size_t w = static_cast<size_t>(l.width), out_stride = w * static_cast<size_t>(bytes_per_pixel(l.mode));
    for (int64_t y = 0; y < l.height; ++y) {
        const int64_t out_y = l.top_down ? y : l.height - 1 - y;
        unpack_row(l.raw, bytes.data() + l.start + static_cast<uint64_t>(y * l.stride),
                   img.pixels.data() + static_cast<size_t>(out_y) * out_stride, w);
    }
    return img;
}

}   // namespace kimi::image::detail
