// PNG → DecodedImage over libpng, in the modes Pillow 9.4's PngImagePlugin opens PNGs in:
// 1 / L (2- and 4-bit grey scaled up) / I;16 / RGB / P (1–8 bit) / LA / RGBA; 16-bit colour keeps
// the high byte and 16-bit grey+alpha becomes RGBA, as Pillow's "RGB;16B"/"LA;16B" unpackers do.
// libpng reports errors by longjmp: the setjmp functions below hold only plain C data.
// libpng is told to skip every ancillary chunk but tRNS (text, iCCP, eXIf, sPLT, ...: nothing the
// pixels need), so no chunk costs memory. APNG: Debian's libpng has no APNG support and skips
// acTL / fcTL / fdAT; the image decoded is the default image (IDAT), which is Pillow's first
// frame. probe_png refuses, as Pillow does at open, an fcTL chunk before IDAT that is truncated,
// out of sequence or outside the IHDR size, and (stricter) any later fcTL outside it.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/decode_internal.h"

namespace kimi::image::detail {

namespace {

struct PngState {
    png_structp png = nullptr;
    png_infop info = nullptr;
    const uint8_t* data = nullptr;
    size_t size = 0, pos = 0;
    char message[160] = {};
    // From png_read_info.
    png_uint_32 width = 0, height = 0;
    int bit_depth = 0, color_type = 0, interlace = 0;
    size_t rowbytes = 0;           // after the transforms (packing), as png_read_image writes rows
    size_t rows_decoded = 0;       // rows (of all Adam7 passes) fully inflated so far
    bool bytewise = false;         // feed libpng the IDAT data one byte at a time
    bool truncated = false;        // the read function ran out of data
    bool has_trans_gray = false;   // a grey tRNS (palette PLTE/tRNS are read by scan_header_chunks)
    uint16_t trans_gray = 0;
};

// Destroys the libpng structs on every path out of decode_png.
struct PngGuard {
    PngState* st;
    ~PngGuard() {
        if (st->png) png_destroy_read_struct(&st->png, st->info ? &st->info : nullptr, nullptr);
    }
};

void png_error_fn(png_structp png, png_const_charp msg) {
    auto* st = static_cast<PngState*>(png_get_error_ptr(png));
    std::snprintf(st->message, sizeof st->message, "%s", msg ? msg : "error");
    png_longjmp(png, 1);
}

void png_warning_fn(png_structp, png_const_charp) {}   // Pillow is silent on what libpng only warns about

void png_read_fn(png_structp png, png_bytep out, size_t n) {
    auto* st = static_cast<PngState*>(png_get_io_ptr(png));
    if (n > st->size - st->pos) {
        st->truncated = true;
        png_error(png, "truncated file");
    }
    std::memcpy(out, st->data + st->pos, n);
    st->pos += n;
}

uint32_t crc32_of(const uint8_t* p, size_t n, uint32_t crc) {
    static uint32_t table[256];
    static const bool init = [] {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        return true;
    }();
    (void)init;
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t be32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 |
        p[3];
}

// The chunks before the first IDAT as Pillow sees them: Pillow verifies the CRC of each (and of
// none after), so libpng is told to accept bad CRCs and this pass rejects what Pillow rejects; and
// Pillow takes PLTE and tRNS as they are (libpng truncates a PLTE longer than 2^depth entries, or
// drops a tRNS longer than PLTE), so those are read here too.
struct HeaderChunks {
    std::span<const uint8_t> plte, trns;
    bool has_plte = false, has_trns = false;
    // The first IHDR (its 13 bytes), and where the chunks before the first IDAT end.
    bool has_ihdr = false;
    uint32_t width = 0, height = 0;
    uint8_t depth = 0, color_type = 0, compression = 0, filter = 0, interlace = 0;
    size_t end = 8;
    bool found_idat = false;
};

[[noreturn]] void bad_frame(const char* what) { throw Error(std::string("png: APNG contains ") + what); }

// An fcTL chunk's frame region must lie within the IHDR size.
void check_fctl_region(std::span<const uint8_t> fctl, const HeaderChunks& c) {
    const uint64_t w = be32(&fctl[4]), h = be32(&fctl[8]), x = be32(&fctl[12]), y = be32(&fctl[16]);
    if (x + w > c.width || y + h > c.height) bad_frame("a frame outside the image (fcTL)");
}

HeaderChunks scan_header_chunks(std::span<const uint8_t> bytes) {
    HeaderChunks chunks;
    size_t pos = 8;
    int64_t seq = -1;   // the last fcTL sequence number (Pillow's _seq_num)
    while (bytes.size() - pos >= 12) {
        const uint32_t length = be32(&bytes[pos]);
        if (length > 0x7fffffffu) throw Error("png: invalid chunk length");
        const uint8_t* type = &bytes[pos + 4];
        if (std::memcmp(type, "IDAT", 4) == 0) {
            chunks.found_idat = true;
            break;
        }
        if (bytes.size() - pos - 12 < length) break;   // truncated: libpng reports it
        const uint32_t crc = crc32_of(type, 4 + static_cast<size_t>(length), 0);
        if (crc != be32(&bytes[pos + 8 + length]))
            throw Error("png: broken file (bad CRC in chunk " + std::string(reinterpret_cast<const char*>(type), 4) +
                        ")");
        const std::span<const uint8_t> data = bytes.subspan(pos + 8, length);
        if (std::memcmp(type, "PLTE", 4) == 0) chunks.plte = data, chunks.has_plte = true;
        if (std::memcmp(type, "tRNS", 4) == 0) chunks.trns = data, chunks.has_trns = true;
        if (std::memcmp(type, "IHDR", 4) == 0 && !chunks.has_ihdr) {
            if (length != 13) throw Error("png: IHDR: invalid");
            chunks.has_ihdr = true;
            chunks.width = be32(&data[0]);
            chunks.height = be32(&data[4]);
            chunks.depth = data[8], chunks.color_type = data[9], chunks.compression = data[10];
            chunks.filter = data[11], chunks.interlace = data[12];
        }
        if (std::memcmp(type, "fcTL", 4) == 0) {   // Pillow's chunk_fcTL, at open
            if (length < 26) bad_frame("a truncated fcTL chunk");
            const int64_t s = be32(&data[0]);
            if ((seq < 0 && s != 0) || (seq >= 0 && s != seq + 1)) bad_frame("frame sequence errors");
            seq = s;
            if (!chunks.has_ihdr) bad_frame("an fcTL chunk before IHDR");
            check_fctl_region(data, chunks);
        }
        pos += 12 + static_cast<size_t>(length);
    }
    chunks.end = pos;
    return chunks;
}

// The mode decode_once gives a colour type and bit depth.
PixelMode png_mode(int ct, int depth) {
    switch (ct) {
        case PNG_COLOR_TYPE_GRAY: return depth == 1 ? PixelMode::k1 : depth == 16 ? PixelMode::kI16 : PixelMode::kL;
        case PNG_COLOR_TYPE_RGB: return PixelMode::kRGB;
        case PNG_COLOR_TYPE_PALETTE: return PixelMode::kP;
        case PNG_COLOR_TYPE_GRAY_ALPHA: return depth == 16 ? PixelMode::kRGBA : PixelMode::kLA;
        default: return PixelMode::kRGBA;
    }
}

// Called by libpng for every row once its data is fully inflated (a no-op transform).
void count_row(png_structp png, png_row_infop, png_bytep) {
    static_cast<PngState*>(png_get_error_ptr(png))->rows_decoded++;
}

// Rows png_read_image inflates: the height, or the rows of each non-empty Adam7 pass.
size_t rows_to_decode(const PngState& st) {
    if (st.interlace == PNG_INTERLACE_NONE) return st.height;
    static constexpr uint32_t kX0[7] = {0, 4, 0, 2, 0, 1, 0}, kY0[7] = {0, 0, 4, 0, 2, 0, 1};
    static constexpr uint32_t kDy[7] = {8, 8, 8, 4, 4, 2, 2};
    size_t rows = 0;
    for (int p = 0; p < 7; ++p)
        if (st.width > kX0[p] && st.height > kY0[p]) rows += (st.height - kY0[p] + kDy[p] - 1) / kDy[p];
    return rows;
}

// Phase 1: signature, IHDR and the chunks up to the first IDAT; sets the transforms.
bool read_header(PngState* st) {
    if (setjmp(png_jmpbuf(st->png))) return false;
    png_set_read_fn(st->png, st, png_read_fn);
    png_set_user_limits(st->png, 0x7fffffffu, 0x7fffffffu);   // our own limits are checked by the caller
    png_set_crc_action(st->png, PNG_CRC_WARN_USE, PNG_CRC_WARN_DISCARD);
    // Every unknown chunk and every ancillary chunk libpng knows but tRNS is skipped unread (-1:
    // libpng's own list), so none is stored; the cap is for whatever libpng still buffers.
    png_set_keep_unknown_chunks(st->png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
    png_set_chunk_malloc_max(st->png, 1 << 20);
    png_read_info(st->png, st->info);
    png_get_IHDR(st->png, st->info, &st->width, &st->height, &st->bit_depth, &st->color_type, &st->interlace, nullptr,
                 nullptr);
    png_bytep trans = nullptr;
    int num_trans = 0;
    png_color_16p trans_color = nullptr;
    if (st->color_type == PNG_COLOR_TYPE_GRAY &&
        png_get_tRNS(st->png, st->info, &trans, &num_trans, &trans_color) != 0 && trans_color) {
        st->has_trans_gray = true;
        st->trans_gray = trans_color->gray;
    }
    if (st->bit_depth < 8) png_set_packing(st->png);   // one byte per sample, values unscaled
    png_set_interlace_handling(st->png);
    png_set_read_user_transform_fn(st->png, count_row);
    if (st->bytewise) png_set_compression_buffer_size(st->png, 1);   // on a read struct: the IDAT read size
    png_read_update_info(st->png, st->info);
    st->rowbytes = png_get_rowbytes(st->png, st->info);
    return true;
}

// Phase 2: all rows (Adam7 passes included) into the caller's buffer.
bool read_rows(PngState* st, png_bytepp rows) {
    if (setjmp(png_jmpbuf(st->png))) return false;
    png_read_image(st->png, rows);
    return true;
}

// 16-bit samples (`n` pixels of `channels`, big-endian) → the result's layout.
void convert_16bit(const uint8_t* in, size_t n, int ct, int channels, uint8_t* out) {
    if (ct == PNG_COLOR_TYPE_GRAY) {   // 16-bit grey: big-endian in the file, native out
        for (size_t i = 0; i < n; ++i) {
            const uint16_t v = static_cast<uint16_t>(in[2 * i] << 8 | in[2 * i + 1]);
            std::memcpy(out + 2 * i, &v, 2);
        }
    } else if (ct == PNG_COLOR_TYPE_GRAY_ALPHA) {   // "LA;16B" → RGBA, high bytes
        for (size_t i = 0; i < n; ++i) {
            out[4 * i] = out[4 * i + 1] = out[4 * i + 2] = in[4 * i];
            out[4 * i + 3] = in[4 * i + 2];
        }
    } else {   // 16-bit RGB / RGBA: the high byte of each sample
        const size_t samples = n * static_cast<size_t>(channels);
        for (size_t i = 0; i < samples; ++i) out[i] = in[2 * i];
    }
}

// A palette image's palette and transparency, from its PLTE and tRNS chunks.
void set_palette(const HeaderChunks& chunks, DecodedImage& img) {
    // PLTE and tRNS as in the file (libpng has accepted it); entries past PLTE are Pillow's
    // default ramp (i, i, i); alpha from tRNS, else 255.
    const size_t num_palette = chunks.has_plte ? std::min<size_t>(chunks.plte.size() / 3, 256) : 0;
    const size_t num_trans = chunks.has_trns ? std::min<size_t>(chunks.trns.size(), 256) : 0;
    img.palette.resize(256 * 4);
    for (size_t i = 0; i < 256; ++i) {
        for (size_t c = 0; c < 3; ++c)
            img.palette[4 * i + c] = i < num_palette ? chunks.plte[3 * i + c] : static_cast<uint8_t>(i);
        img.palette[4 * i + 3] = i < num_trans ? chunks.trns[i] : 255;
    }
    if (chunks.has_trns) {
        // Pillow: info["transparency"] is the index when tRNS is 0xff* 0x00 0xff*, else the bytes.
        img.has_transparency = true;
        int zero = -1, zeros = 0, other = 0;
        for (size_t i = 0; i < chunks.trns.size(); ++i) {
            if (chunks.trns[i] == 0) {
                if (zero < 0) zero = static_cast<int>(i);
                ++zeros;
            } else if (chunks.trns[i] != 255) {
                ++other;
            }
        }
        if (zeros == 1 && other == 0) img.transparent_value = zero;
    }
}

DecodedImage decode_once(std::span<const uint8_t> bytes, const HeaderChunks& chunks, const DecodeLimits& limits,
                         bool bytewise, bool& truncated) {
    PngState st;
    st.bytewise = bytewise;
    st.data = bytes.data();
    st.size = bytes.size();
    PngGuard guard{&st};
    st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, png_error_fn, png_warning_fn);
    if (!st.png) throw Error("png: out of memory");
    st.info = png_create_info_struct(st.png);
    if (!st.info) throw Error("png: out of memory");
    if (!read_header(&st)) throw Error(std::string("png: ") + st.message);
    check_dimensions("png", st.width, st.height, limits);

    DecodedImage img;
    img.width = static_cast<int32_t>(st.width);
    img.height = static_cast<int32_t>(st.height);
    const int depth = st.bit_depth, ct = st.color_type;
    if (ct != PNG_COLOR_TYPE_GRAY && ct != PNG_COLOR_TYPE_RGB && ct != PNG_COLOR_TYPE_PALETTE &&
        ct != PNG_COLOR_TYPE_GRAY_ALPHA && ct != PNG_COLOR_TYPE_RGB_ALPHA)
        throw Error("png: unsupported color type " + std::to_string(ct));
    img.mode = png_mode(ct, depth);
    const int channels = ct == PNG_COLOR_TYPE_RGB ? 3
        : ct == PNG_COLOR_TYPE_GRAY_ALPHA         ? 2
        : ct == PNG_COLOR_TYPE_RGB_ALPHA          ? 4
                                                  : 1;
    const size_t w = st.width, h = st.height;
    const size_t sample_bytes = depth == 16 ? 2 : 1;
    if (st.rowbytes != w * static_cast<size_t>(channels) * sample_bytes) throw Error("png: unexpected row layout");

    img.pixels.resize(pixel_bytes(img.width, img.height, img.mode));
    // 8-bit samples and packed samples (one byte each after png_set_packing) are read straight
    // into the result (grey < 8 bits is scaled in place); 16-bit samples go through `raw`.
    const bool direct = depth <= 8;
    std::vector<uint8_t> raw;
    uint8_t* base = img.pixels.data();
    if (!direct) {
        raw.resize(st.rowbytes * h);
        base = raw.data();
    }
    std::vector<png_bytep> rows(h);
    for (size_t y = 0; y < h; ++y) rows[y] = base + y * st.rowbytes;
    // Pillow stops reading once the last row is inflated: an error after that point (a file cut in
    // the zlib checksum, the IDAT CRC or the chunks after the image) still yields the image.
    if (!read_rows(&st, rows.data()) && st.rows_decoded < rows_to_decode(st)) {
        truncated = st.truncated;
        throw Error(std::string("png: ") + st.message);
    }

    uint8_t* out = img.pixels.data();
    const size_t n = w * h;
    if (depth < 8 && ct == PNG_COLOR_TYPE_GRAY) {   // unpacked to 0..2^depth-1: Pillow's "1", "L;2", "L;4"
        const uint8_t scale = depth == 1 ? 255 : depth == 2 ? 0x55 : 0x11;
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(out[i] * scale);
    }
    if (!direct) convert_16bit(raw.data(), n, ct, channels, out);

    if (ct == PNG_COLOR_TYPE_PALETTE) {
        set_palette(chunks, img);
    } else if (ct == PNG_COLOR_TYPE_GRAY && st.has_trans_gray) {
        img.has_transparency = true;   // Pillow: info["transparency"] = the raw tRNS grey value
        img.transparent_value = st.trans_gray;
    }
    return img;
}

}   // namespace

ImageHeader probe_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    const HeaderChunks c = scan_header_chunks(bytes);
    if (!c.has_ihdr) throw Error("png: no IHDR chunk before the image data (truncated or not a PNG)");
    // png_check_IHDR's rules: what libpng refuses is refused here.
    const int depth = c.depth, ct = c.color_type;
    const bool depth_ok = ct == 0         ? (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)
        : ct == 3                         ? (depth == 1 || depth == 2 || depth == 4 || depth == 8)
        : (ct == 2 || ct == 4 || ct == 6) ? (depth == 8 || depth == 16)
                                          : false;
    if (!depth_ok)
        throw Error("png: invalid bit depth " + std::to_string(depth) + " for color type " + std::to_string(ct));
    if (c.compression != 0 || c.filter != 0 || c.interlace > 1) throw Error("png: IHDR: invalid method");
    if (c.width > 0x7fffffffu || c.height > 0x7fffffffu) throw Error("png: invalid image size");
    check_dimensions("png", c.width, c.height, limits);
    // APNG frames after the image data: each fcTL's region must fit the image too.
    size_t pos = c.end;
    while (c.found_idat && bytes.size() - pos >= 12) {
        const uint32_t length = be32(&bytes[pos]);
        if (length > 0x7fffffffu || bytes.size() - pos - 12 < length) break;   // libpng or nothing will read it
        if (std::memcmp(&bytes[pos + 4], "fcTL", 4) == 0 && length >= 26)
            check_fctl_region(bytes.subspan(pos + 8, length), c);
        if (std::memcmp(&bytes[pos + 4], "IEND", 4) == 0) break;
        pos += 12 + static_cast<size_t>(length);
    }

    ImageHeader h;
    h.width = static_cast<int32_t>(c.width);
    h.height = static_cast<int32_t>(c.height);
    h.mode = png_mode(ct, depth);
    h.transparency = c.has_trns;
    const int64_t w = c.width, hh = c.height;
    const int64_t channels = ct == 2 ? 3 : ct == 4 ? 2 : ct == 6 ? 4 : 1;
    const int64_t sample_bytes = depth == 16 ? 2 : 1;
    // The result; the 16-bit rows (read apart, then narrowed); one row pointer per row; libpng's
    // two row buffers (rows padded to 8 pixels, plus filter byte and slack); zlib's inflate state
    // and 32 KiB window; libpng's structs, palette and 8 KiB IDAT buffer.
    const int64_t row = ((w + 7) & ~int64_t{7}) * channels * sample_bytes + 64;
    h.decode_bytes = w * hh * bytes_per_pixel(h.mode) + (depth == 16 ? w * hh * channels * 2 : 0) + hh * 8 + 2 * row +
        (64 << 10) + kDecodeSlackBytes;
    return h;
}

DecodedImage decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    const HeaderChunks chunks = scan_header_chunks(bytes);
    bool truncated = false;
    try {
        return decode_once(bytes, chunks, limits, false, truncated);
    } catch (const Error&) {
        if (!truncated) throw;
    }
    // A truncated file: libpng reads IDAT data in blocks, Pillow's inflater as far as the data goes.
    // Again, a byte at a time, to tell whether every row inflates before the data runs out.
    return decode_once(bytes, chunks, limits, true, truncated);
}

}   // namespace kimi::image::detail
