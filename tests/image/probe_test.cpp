// probe_image tests (also run under ASan + UBSan): for images of every format written here with
// libpng / libjpeg / libwebp / giflib (and by hand), the probed size and mode are the decoded ones
// (EXIF orientations included) and the decode and prepare_image heap peaks, measured with every
// malloc of the process (the C libraries' included), stay within decode_bytes / prepare_bytes and
// not far below them; header bombs (a 9459×9459 GIF screen around a 1×1 frame, a 9000×9000
// lossless WebP of a few bytes) are probed at their full size at once without allocating it;
// malformed frames, canvases and truncated headers are refused. The fuzz target
// fuzz_image_header checks the same bounds on arbitrary bytes.
#include <gif_lib.h>
#include <gtest/gtest.h>
#include <png.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "core/error.h"
#include "image/decode.h"
#include "image/decode_internal.h"
#include "image/preprocess.h"
#include "image/probe.h"
#include "byte_writer.h"
#include "heap_meter.h"

namespace kimi::image {
namespace {

using namespace test;   // Bytes, put_*, png_chunk, zlib_stored (byte_writer.h)

// A test pattern: byte c of pixel (x, y).
uint8_t pattern(int x, int y, int c) { return static_cast<uint8_t>((x * 7 + y * 13 + c * 61 + (x * y) / 5) & 0xff); }

Bytes pixels(int w, int h, int channels) {
    Bytes p(static_cast<size_t>(w) * static_cast<size_t>(h) * static_cast<size_t>(channels));
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c)
                p[(static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)) * channels + c] =
                    pattern(x, y, c);
    return p;
}

// --- encoders -------------------------------------------------------------------------------------

// "Exif\0\0" + a big-endian TIFF whose IFD0 holds Orientation (0x0112) = o.
Bytes exif_payload(int o) {
    return {'E', 'x', 'i', 'f',  0,    0, 'M', 'M', 0, 42, 0, 0, 0,
            8,   0,   1,   0x01, 0x12, 0, 3,   0,   0, 0,  1, 0, static_cast<uint8_t>(o),
            0,   0,   0,   0,    0,    0};
}

Bytes encode_jpeg(int w, int h, int comps, bool progressive, int orientation = 0, int h_samp = 2, int v_samp = 2) {
    jpeg_compress_struct c;
    jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buf, &size);
    c.image_width = static_cast<JDIMENSION>(w);
    c.image_height = static_cast<JDIMENSION>(h);
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 85, TRUE);
    if (comps == 3) c.comp_info[0].h_samp_factor = h_samp, c.comp_info[0].v_samp_factor = v_samp;
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    if (orientation) {
        const Bytes exif = exif_payload(orientation);
        jpeg_write_marker(&c, JPEG_APP0 + 1, exif.data(), static_cast<unsigned>(exif.size()));
    }
    const Bytes px = pixels(w, h, comps);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = const_cast<uint8_t*>(&px[static_cast<size_t>(c.next_scanline) * w * comps]);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    Bytes out(buf, buf + size);
    jpeg_destroy_compress(&c);
    std::free(buf);
    return out;
}

// Lossless or lossy (quality), RGB or RGBA.
Bytes encode_webp(int w, int h, bool alpha, bool lossless, const Bytes* px = nullptr) {
    const int ch = alpha ? 4 : 3;
    const Bytes own = pixels(w, h, ch);
    const Bytes& p = px ? *px : own;
    uint8_t* out = nullptr;
    size_t n = 0;
    if (lossless)
        n = alpha ? WebPEncodeLosslessRGBA(p.data(), w, h, w * 4, &out)
                  : WebPEncodeLosslessRGB(p.data(), w, h, w * 3, &out);
    else
        n = alpha ? WebPEncodeRGBA(p.data(), w, h, w * 4, 80, &out) : WebPEncodeRGB(p.data(), w, h, w * 3, 80, &out);
    Bytes b(out, out + n);
    WebPFree(out);
    return b;
}

Bytes encode_webp_animated(int w, int h, bool lossless) {
    WebPAnimEncoderOptions opts;
    WebPAnimEncoderOptionsInit(&opts);
    WebPAnimEncoder* enc = WebPAnimEncoderNew(w, h, &opts);
    WebPConfig cfg;
    WebPConfigInit(&cfg);
    cfg.lossless = lossless;
    for (int f = 0; f < 2; ++f) {
        WebPPicture pic;
        WebPPictureInit(&pic);
        pic.width = w, pic.height = h, pic.use_argb = 1;
        Bytes px = pixels(w, h, 4);
        for (size_t i = 3; i < px.size(); i += 4) px[i] = f ? 255 : 128;
        WebPPictureImportRGBA(&pic, px.data(), w * 4);
        WebPAnimEncoderAdd(enc, &pic, f * 100, &cfg);
        WebPPictureFree(&pic);
    }
    WebPAnimEncoderAdd(enc, nullptr, 200, nullptr);
    WebPData data;
    WebPDataInit(&data);
    WebPAnimEncoderAssemble(enc, &data);
    Bytes b(data.bytes, data.bytes + data.size);
    WebPDataClear(&data);
    WebPAnimEncoderDelete(enc);
    return b;
}

// libpng's simplified writer: G / GA / RGB / RGBA, 8 or 16 bits (linear).
Bytes encode_png(int w, int h, uint32_t format) {
    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = static_cast<png_uint_32>(w);
    img.height = static_cast<png_uint_32>(h);
    img.format = format;
    const int ch = PNG_IMAGE_SAMPLE_CHANNELS(format), comp = PNG_IMAGE_SAMPLE_COMPONENT_SIZE(format);
    const Bytes px = pixels(w, h, ch * comp);
    png_alloc_size_t size = 0;
    png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr);
    Bytes out(size);
    png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr);
    out.resize(size);
    png_image_free(&img);
    return out;
}

// A hand-made PNG (stored deflate blocks): 8-bit palette (16 entries) or 1-bit grey, optionally
// Adam7-interlaced, with extra chunks before / after the image data.
Bytes make_png(uint32_t w, uint32_t h, bool palette, bool interlace,
               const std::vector<std::pair<std::string, Bytes>>& before = {},
               const std::vector<std::pair<std::string, Bytes>>& after = {}) {
    Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    Bytes ihdr;
    put_be32(ihdr, w);
    put_be32(ihdr, h);
    ihdr.insert(ihdr.end(),
                {static_cast<uint8_t>(palette ? 8 : 1), static_cast<uint8_t>(palette ? 3 : 0), 0, 0,
                 static_cast<uint8_t>(interlace ? 1 : 0)});
    png_chunk(out, "IHDR", ihdr);
    if (palette) {
        Bytes plte;
        for (int i = 0; i < 16; ++i)
            plte.insert(plte.end(), {static_cast<uint8_t>(i * 16), 7, static_cast<uint8_t>(255 - i)});
        png_chunk(out, "PLTE", plte);
    }
    for (const auto& [type, data] : before) png_chunk(out, type.c_str(), data);
    // Rows of each pass (one pass when not interlaced), each behind a filter byte 0.
    static constexpr uint32_t kX0[7] = {0, 4, 0, 2, 0, 1, 0}, kY0[7] = {0, 0, 4, 0, 2, 0, 1};
    static constexpr uint32_t kDx[7] = {8, 8, 4, 4, 2, 2, 1}, kDy[7] = {8, 8, 8, 4, 4, 2, 2};
    Bytes raw;
    for (int pass = 0; pass < (interlace ? 7 : 1); ++pass) {
        const uint32_t x0 = interlace ? kX0[pass] : 0, y0 = interlace ? kY0[pass] : 0;
        const uint32_t dx = interlace ? kDx[pass] : 1, dy = interlace ? kDy[pass] : 1;
        if (x0 >= w || y0 >= h) continue;
        for (uint32_t y = y0; y < h; y += dy) {
            raw.push_back(0);
            Bytes row;
            for (uint32_t x = x0; x < w; x += dx)
                row.push_back(static_cast<uint8_t>(pattern(static_cast<int>(x), static_cast<int>(y), 0) & 15));
            if (palette) {
                raw.insert(raw.end(), row.begin(), row.end());
            } else {
                for (size_t i = 0; i < row.size(); i += 8) {
                    uint8_t b = 0;
                    for (size_t k = 0; k < 8 && i + k < row.size(); ++k)
                        b |= static_cast<uint8_t>((row[i + k] & 1) << (7 - k));
                    raw.push_back(b);
                }
            }
        }
    }
    png_chunk(out, "IDAT", zlib_stored(raw));
    for (const auto& [type, data] : after) png_chunk(out, type.c_str(), data);
    png_chunk(out, "IEND", {});
    return out;
}

// An APNG fcTL payload: sequence, size, offset, delay, dispose, blend.
Bytes fctl(uint32_t seq, uint32_t w, uint32_t h, uint32_t x, uint32_t y) {
    Bytes b;
    put_be32(b, seq);
    put_be32(b, w);
    put_be32(b, h);
    put_be32(b, x);
    put_be32(b, y);
    b.insert(b.end(), {0, 1, 0, 10, 0, 0});
    return b;
}

int gif_write(GifFileType* g, const GifByteType* data, int n) {
    auto* out = static_cast<Bytes*>(g->UserData);
    out->insert(out->end(), data, data + n);
    return n;
}

// A GIF of one fw × fh frame at (left, top) on a sw × sh screen, `colors` palette entries (a grey
// ramp when `grey`), through giflib's encoder.
Bytes encode_gif(int sw, int sh, int left, int top, int fw, int fh, int colors = 16, bool grey = false) {
    Bytes out;
    int err = 0;
    GifFileType* g = EGifOpen(&out, gif_write, &err);
    ColorMapObject* map = GifMakeMapObject(colors, nullptr);
    for (int i = 0; i < colors; ++i) {
        map->Colors[i].Red = static_cast<GifByteType>(grey ? i : i * 16);
        map->Colors[i].Green = static_cast<GifByteType>(grey ? i : 100);
        map->Colors[i].Blue = static_cast<GifByteType>(grey ? i : 255 - i);
    }
    EGifSetGifVersion(g, true);
    EGifPutScreenDesc(g, sw, sh, 8, 0, map);
    EGifPutImageDesc(g, left, top, fw, fh, false, nullptr);
    std::vector<GifPixelType> line(static_cast<size_t>(fw));
    for (int y = 0; y < fh; ++y) {
        for (int x = 0; x < fw; ++x)
            line[static_cast<size_t>(x)] = static_cast<GifPixelType>(pattern(x, y, 0) % colors);
        EGifPutLine(g, line.data(), fw);
    }
    EGifCloseFile(g, &err);
    GifFreeMapObject(map);
    return out;
}

// A 24-bit (bottom-up) or 8-bit palette BMP.
Bytes make_bmp(int32_t w, int32_t h, bool palette) {
    const uint32_t bits = palette ? 8 : 24;
    const uint32_t stride = (static_cast<uint32_t>(w) * bits / 8 + 3) & ~3u;
    const uint32_t pal = palette ? 256 * 4 : 0;
    Bytes out = {'B', 'M'};
    put_le32(out, 54 + pal + stride * static_cast<uint32_t>(h));
    put_le32(out, 0);
    put_le32(out, 54 + pal);
    put_le32(out, 40);
    put_le32(out, static_cast<uint32_t>(w));
    put_le32(out, static_cast<uint32_t>(h));
    put_le16(out, 1);
    put_le16(out, bits);
    for (int i = 0; i < 6; ++i) put_le32(out, 0);
    for (uint32_t i = 0; palette && i < 256; ++i)
        out.insert(out.end(), {static_cast<uint8_t>(i), 9, static_cast<uint8_t>(255 - i), 0});
    for (int32_t r = 0; r < h; ++r) {
        for (int32_t x = 0; x < w; ++x) {
            if (palette)
                out.push_back(pattern(x, r, 0));
            else
                out.insert(out.end(), {pattern(x, r, 0), pattern(x, r, 1), pattern(x, r, 2)});
        }
        for (uint32_t p = static_cast<uint32_t>(w) * bits / 8; p < stride; ++p) out.push_back(0);
    }
    return out;
}

// --- checks ---------------------------------------------------------------------------------------

// The probe agrees with the decoder on size and mode, and the decode and prepare peaks stay
// within the bounds. Returns the header.
ImageHeader expect_consistent(const Bytes& bytes, const std::string& what, const MediaConfig& mc = {}) {
    ImageHeader h;
    EXPECT_NO_THROW(h = probe_image(bytes)) << what;
    DecodedImage img;
    const int64_t decode_peak = peak_of([&] { img = decode_image(bytes); });
    EXPECT_EQ(img.width, h.width) << what;
    EXPECT_EQ(img.height, h.height) << what;
    EXPECT_EQ(img.mode, h.mode) << what;
    EXPECT_LE(decode_peak, h.decode_bytes) << what;
    const int64_t pixel_bytes = int64_t{h.width} * h.height * bytes_per_pixel(h.mode);
    EXPECT_GE(h.decode_bytes, pixel_bytes) << what;
    const int64_t bound = prepare_bytes(h, mc);
    const int64_t prepare_peak = peak_of([&] {
        const PreparedImage p = prepare_image(img, mc);
        EXPECT_FALSE(p.patches.empty());
    });
    EXPECT_LE(prepare_peak, bound) << what;
    return h;
}

void expect_refused(const Bytes& bytes, const std::string& what, const std::string& fragment = "") {
    try {
        probe_image(bytes);
        ADD_FAILURE() << what << ": probe accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << what << ": " << e.what();
    }
    EXPECT_THROW(decode_image(bytes), Error) << what;
}

// The bytes of a GIF with a 9459 × 9459 logical screen and one 1 × 1 frame, written by hand:
// header, screen descriptor with a 2-entry global colour table, a graphic control extension, a
// NETSCAPE looping extension, the image descriptor, LZW data (minimum code size 2: clear, index
// 0, end) and the trailer.
Bytes gif_bomb() {
    Bytes b = {'G', 'I', 'F', '8', '9', 'a'};
    put_le16(b, 9459);
    put_le16(b, 9459);
    b.insert(b.end(), {0x80, 0, 0, 0, 0, 0, 255, 255, 255});   // flags (GCT, 2 colours), bg, aspect, GCT
    b.insert(b.end(), {0x21, 0xf9, 4, 0, 0, 0, 0, 0});         // graphic control extension
    b.insert(b.end(), {0x21, 0xff, 11, 'N', 'E', 'T', 'S', 'C', 'A', 'P', 'E', '2', '.', '0', 3, 1, 0, 0, 0});
    b.push_back(0x2c);   // image descriptor: 1 × 1 at 0, 0
    put_le16(b, 0), put_le16(b, 0), put_le16(b, 1), put_le16(b, 1);
    b.push_back(0);
    b.insert(b.end(), {2, 2, 0x44, 0x01, 0, 0x3b});   // LZW data, trailer
    return b;
}

// --- tests ----------------------------------------------------------------------------------------

TEST(ImageProbe, HeapMeterWorks) {
    ASSERT_TRUE(meter_installed());
    const int64_t peak = peak_of([] {
        std::vector<uint8_t> v(1 << 20, 1);
        EXPECT_EQ(v[100], 1);
    });
    EXPECT_GE(peak, 1 << 20);
    EXPECT_LT(peak, (1 << 20) + 4096);
}

TEST(ImageProbe, MatchesDecodeEveryFormat) {
    // PNG: every colour type and depth decode_png has a path for, interlaced too.
    EXPECT_EQ(expect_consistent(encode_png(37, 21, PNG_FORMAT_RGB), "png rgb").mode, PixelMode::kRGB);
    EXPECT_EQ(expect_consistent(encode_png(37, 21, PNG_FORMAT_RGBA), "png rgba").mode, PixelMode::kRGBA);
    EXPECT_EQ(expect_consistent(encode_png(37, 21, PNG_FORMAT_GRAY), "png grey").mode, PixelMode::kL);
    EXPECT_EQ(expect_consistent(encode_png(37, 21, PNG_FORMAT_GA), "png grey alpha").mode, PixelMode::kLA);
    EXPECT_EQ(expect_consistent(encode_png(37, 21, PNG_FORMAT_LINEAR_Y), "png grey 16").mode, PixelMode::kI16);
    EXPECT_EQ(expect_consistent(encode_png(37, 21, PNG_FORMAT_LINEAR_RGB_ALPHA), "png rgba 16").mode, PixelMode::kRGBA);
    EXPECT_EQ(expect_consistent(make_png(37, 21, true, false), "png palette").mode, PixelMode::kP);
    EXPECT_EQ(expect_consistent(make_png(37, 21, true, true), "png palette interlaced").mode, PixelMode::kP);
    EXPECT_EQ(expect_consistent(make_png(37, 21, false, true), "png 1-bit interlaced").mode, PixelMode::k1);
    // JPEG: grey, RGB with 4:2:0 and 4:4:4 sampling, CMYK; baseline and progressive.
    for (bool progressive : {false, true}) {
        const std::string p = progressive ? " progressive" : "";
        EXPECT_EQ(expect_consistent(encode_jpeg(45, 29, 1, progressive), "jpeg grey" + p).mode, PixelMode::kL);
        EXPECT_EQ(expect_consistent(encode_jpeg(45, 29, 3, progressive), "jpeg rgb" + p).mode, PixelMode::kRGB);
        expect_consistent(encode_jpeg(45, 29, 3, progressive, 0, 1, 1), "jpeg rgb 4:4:4" + p);
        EXPECT_EQ(expect_consistent(encode_jpeg(45, 29, 4, progressive), "jpeg cmyk" + p).mode, PixelMode::kCMYK);
    }
    // WebP: lossless and lossy, with and without alpha, animated.
    EXPECT_EQ(expect_consistent(encode_webp(41, 27, false, true), "webp lossless").mode, PixelMode::kRGB);
    EXPECT_EQ(expect_consistent(encode_webp(41, 27, true, true), "webp lossless rgba").mode, PixelMode::kRGBA);
    EXPECT_EQ(expect_consistent(encode_webp(41, 27, false, false), "webp lossy").mode, PixelMode::kRGB);
    EXPECT_EQ(expect_consistent(encode_webp(41, 27, true, false), "webp lossy alpha").mode, PixelMode::kRGBA);
    const ImageHeader anim = expect_consistent(encode_webp_animated(41, 27, true), "webp animated");
    EXPECT_EQ(anim.width, 41);
    expect_consistent(encode_webp_animated(41, 27, false), "webp animated lossy");
    // GIF: palette and grey-ramp (mode L); BMP: 24-bit and palette.
    EXPECT_EQ(expect_consistent(encode_gif(33, 19, 0, 0, 33, 19), "gif").mode, PixelMode::kP);
    EXPECT_EQ(expect_consistent(encode_gif(33, 19, 0, 0, 33, 19, 256, true), "gif grey").mode, PixelMode::kL);
    EXPECT_EQ(expect_consistent(make_bmp(31, 17, false), "bmp 24").mode, PixelMode::kRGB);
    EXPECT_EQ(expect_consistent(make_bmp(31, 17, true), "bmp 8").mode, PixelMode::kP);
}

// A lossless WebP through libwebp's advanced API (method 0..6 picks the transforms, the colour
// cache and the meta Huffman image).
Bytes encode_webp_lossless(int w, int h, const Bytes& rgba, int method, int quality) {
    WebPConfig cfg;
    WebPConfigInit(&cfg);
    cfg.lossless = 1;
    cfg.method = method;
    cfg.quality = static_cast<float>(quality);
    cfg.exact = 1;
    WebPPicture pic;
    WebPPictureInit(&pic);
    pic.width = w, pic.height = h, pic.use_argb = 1;
    WebPPictureImportRGBA(&pic, rgba.data(), w * 4);
    WebPMemoryWriter writer;
    WebPMemoryWriterInit(&writer);
    pic.writer = WebPMemoryWrite;
    pic.custom_ptr = &writer;
    EXPECT_TRUE(WebPEncode(&cfg, &pic));
    Bytes out(writer.mem, writer.mem + writer.size);
    WebPMemoryWriterClear(&writer);
    WebPPictureFree(&pic);
    return out;
}

TEST(ImageProbe, LosslessWebpScanFollowsTheEncoder) {
    // The probe's walk of the VP8L header (transforms, colour cache, meta Huffman image) must accept
    // what libwebp writes, and bound what libwebp allocates for it: noise (many Huffman groups),
    // few colours (colour-indexing at 1, 2, 4 and 8 bits per pixel), thin images, alpha.
    uint32_t seed = 1;
    auto rnd = [&] { return seed = seed * 1664525u + 1013904223u, seed >> 24; };
    int64_t groups_seen = 0;
    struct Case {
        int w, h, colors;   // colors 0: blocks of noise of varying strength
    };
    for (const Case c : {Case{96, 80, 0}, Case{200, 3, 0}, Case{1, 50, 0}, Case{64, 64, 2}, Case{64, 64, 4},
                         Case{65, 33, 16}, Case{40, 40, 200}}) {
        Bytes rgba(static_cast<size_t>(c.w) * c.h * 4);
        for (int y = 0; y < c.h; ++y) {
            for (int x = 0; x < c.w; ++x) {
                uint8_t* p = &rgba[(static_cast<size_t>(y) * c.w + x) * 4];
                if (c.colors) {
                    const uint32_t k = rnd() % static_cast<uint32_t>(c.colors);
                    p[0] = static_cast<uint8_t>(k * 37), p[1] = static_cast<uint8_t>(k * 11),
                    p[2] = static_cast<uint8_t>(k);
                    p[3] = k % 3 ? 255 : 128;
                } else {
                    const uint32_t spread = 1u + ((x / 16 + y / 16) % 5) * 20;
                    for (int ch = 0; ch < 4; ++ch)
                        p[ch] = static_cast<uint8_t>(pattern(x / 16, y / 16, ch) + rnd() % spread);
                }
            }
        }
        for (int method : {0, 3, 6}) {
            for (int quality : {0, 100}) {
                const Bytes webp = encode_webp_lossless(c.w, c.h, rgba, method, quality);
                const std::string what = "webp lossless " + std::to_string(c.w) + "x" + std::to_string(c.h) +
                    " colours " + std::to_string(c.colors) + " method " + std::to_string(method) + " quality " +
                    std::to_string(quality);
                expect_consistent(webp, what);
                // The scan's Huffman tables are exactly the block libwebp allocates for them.
                ASSERT_EQ(std::string(webp.begin() + 12, webp.begin() + 16), "VP8L") << what;
                const detail::Vp8lScan scan =
                    detail::scan_vp8l(std::span<const uint8_t>(webp).subspan(20), true, c.w, c.h);
                ASSERT_TRUE(scan.parsed) << what;
                const bool found = allocates(scan.table_bytes, [&] { decode_image(webp); });
                EXPECT_TRUE(found) << what << ": no allocation of " << scan.table_bytes << " bytes (" << scan.groups
                                   << " groups)";
                groups_seen = std::max(groups_seen, scan.groups);
            }
        }
    }
    EXPECT_GT(groups_seen, 10);   // the meta Huffman image was exercised
}

TEST(ImageProbe, JpegSamplingFactors) {
    // Every luma sampling factor libjpeg writes (chroma 1 × 1), baseline and progressive: libjpeg's
    // buffers stay within jpeg_library_bytes, which also caps them (max_memory_to_use).
    for (int hs = 1; hs <= 4; ++hs) {
        for (int vs = 1; vs <= 4 && hs * vs <= 8; ++vs) {   // at most 10 blocks in an MCU
            for (bool progressive : {false, true}) {
                const std::string what =
                    "jpeg " + std::to_string(hs) + "x" + std::to_string(vs) + (progressive ? " progressive" : "");
                expect_consistent(encode_jpeg(203, 77, 3, progressive, 0, hs, vs), what);
            }
        }
    }
}

TEST(ImageProbe, JpegExifOrientationSwapsSides) {
    for (int o = 1; o <= 8; ++o) {
        for (bool progressive : {false, true}) {
            const ImageHeader h =
                expect_consistent(encode_jpeg(40, 24, 3, progressive, o), "orientation " + std::to_string(o));
            EXPECT_EQ(h.orientation, o);
            EXPECT_EQ(h.width, o >= 5 ? 24 : 40) << o;
            EXPECT_EQ(h.height, o >= 5 ? 40 : 24) << o;
        }
    }
}

TEST(ImageProbe, OrientedRowsMatchApplyOrientation) {
    for (int bpp : {1, 3, 4}) {
        for (int o = 1; o <= 8; ++o) {
            const int w = 5, h = 3;
            DecodedImage img;
            img.width = w, img.height = h;
            img.mode = bpp == 1 ? PixelMode::kL : bpp == 3 ? PixelMode::kRGB : PixelMode::kRGBA;
            img.pixels = pixels(w, h, bpp);
            Bytes rows(img.pixels.size());
            for (int y = 0; y < h; ++y)
                detail::place_oriented_row(&img.pixels[static_cast<size_t>(y * w * bpp)], static_cast<size_t>(y), w, h,
                                           static_cast<size_t>(bpp), o, rows.data());
            detail::apply_orientation(img, o);
            EXPECT_EQ(rows, img.pixels) << "orientation " << o << " bpp " << bpp;
        }
    }
}

TEST(ImageProbe, BoundsAreTightForNormalImages) {
    // Larger images, where the fixed slack no longer dominates: the bound is within 2× (+1 MiB) of
    // the measured peak, for decoding and for the preparation.
    const MediaConfig mc;
    const std::vector<std::pair<std::string, Bytes>> files = {
        {"png rgb", encode_png(640, 480, PNG_FORMAT_RGB)},
        {"png rgba 16", encode_png(640, 480, PNG_FORMAT_LINEAR_RGB_ALPHA)},
        {"jpeg baseline", encode_jpeg(640, 480, 3, false)},
        {"jpeg progressive", encode_jpeg(640, 480, 3, true)},
        {"jpeg orientation 6", encode_jpeg(640, 480, 3, false, 6)},
        {"webp lossless", encode_webp(640, 480, false, true)},
        {"webp lossy alpha", encode_webp(640, 480, true, false)},
        {"webp animated", encode_webp_animated(640, 480, true)},
        {"gif", encode_gif(640, 480, 0, 0, 640, 480)},
        {"bmp", make_bmp(640, 480, false)},
    };
    for (const auto& [name, bytes] : files) {
        const ImageHeader h = probe_image(bytes);
        DecodedImage img;
        const int64_t decode_peak = peak_of([&] { img = decode_image(bytes); });
        EXPECT_LE(decode_peak, h.decode_bytes) << name;
        EXPECT_LE(h.decode_bytes, 2 * decode_peak + (1 << 20)) << name << ": peak " << decode_peak;
        const int64_t bound = prepare_bytes(h, mc);
        const int64_t prepare_peak = peak_of([&] { prepare_image(img, mc); });
        EXPECT_LE(prepare_peak, bound) << name;
        EXPECT_LE(bound, 2 * prepare_peak + (1 << 20)) << name << ": peak " << prepare_peak;
        // The numbers, in the XML report (--gtest_output=xml).
        RecordProperty(name,
                       std::to_string(decode_peak) + " / " + std::to_string(h.decode_bytes) + ", prepare " +
                           std::to_string(prepare_peak) + " / " + std::to_string(bound));
    }
}

TEST(ImageProbe, PrepareBoundHoldsAcrossConfigs) {
    const Bytes rgba = encode_png(300, 200, PNG_FORMAT_RGBA);
    const Bytes grey16 = encode_png(300, 200, PNG_FORMAT_LINEAR_Y);
    const Bytes palette = make_png(300, 200, true, false);
    for (const Bytes* b : {&rgba, &grey16, &palette}) {
        for (int64_t limit : {16, 256, 4096}) {
            for (bool after : {true, false}) {
                MediaConfig mc;
                mc.in_patch_limit = limit;
                mc.fill_after_resize = after;
                expect_consistent(*b, "limit " + std::to_string(limit) + (after ? " after" : " before"), mc);
            }
        }
    }
}

TEST(ImageProbe, GifScreenBombIsProbedWithoutAllocating) {
    const Bytes bomb = gif_bomb();
    EXPECT_EQ(bomb.size(), 62u);
    ImageHeader h;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t peak = peak_of([&] { h = probe_image(bomb); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(seconds, 0.1);
    EXPECT_LT(peak, 64 * 1024);   // nothing proportional to the 89 M pixels
    EXPECT_EQ(h.format, "gif");
    EXPECT_EQ(h.width, 9459);
    EXPECT_EQ(h.height, 9459);
    EXPECT_GE(h.decode_bytes, int64_t{9459} * 9459);
    // Stricter limits refuse it from the header.
    DecodeLimits limits;
    limits.max_pixels = 1 << 24;
    EXPECT_THROW(probe_image(bomb, limits), Error);
    EXPECT_THROW(decode_image(bomb, limits), Error);
    // The same bomb at a size this test can afford decodes within its bound.
    Bytes small = bomb;
    small[6] = small[8] = 0xd0, small[7] = small[9] = 0x07;   // 2000 × 2000
    expect_consistent(small, "gif 2000x2000 screen");
}

TEST(ImageProbe, LosslessWebpHeaderBomb) {
    // A solid 8 × 8 image codes as a one-colour palette and zero-bit codes, whatever its size: its
    // VP8L header (14-bit width - 1, height - 1) can declare 9000 × 9000 in a few dozen bytes.
    Bytes solid(8 * 8 * 4, 0);
    for (size_t i = 0; i < solid.size(); i += 4) solid[i] = 200, solid[i + 1] = 30, solid[i + 3] = 255;
    const Bytes small = encode_webp(8, 8, true, true, &solid);
    ASSERT_GE(small.size(), 25u);
    ASSERT_EQ(std::string(small.begin() + 12, small.begin() + 16), "VP8L");
    auto with_size = [&](uint32_t w, uint32_t h) {
        Bytes b = small;
        uint32_t bits = static_cast<uint32_t>(b[21]) | static_cast<uint32_t>(b[22]) << 8 |
            static_cast<uint32_t>(b[23]) << 16 | static_cast<uint32_t>(b[24]) << 24;
        bits = (bits & ~((1u << 28) - 1)) | (w - 1) | (h - 1) << 14;
        for (int i = 0; i < 4; ++i) b[21 + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (8 * i));
        return b;
    };
    const Bytes bomb = with_size(9000, 9000);
    ImageHeader h;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t peak = peak_of([&] { h = probe_image(bomb); });
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.1);
    EXPECT_LT(peak, 256 * 1024);
    EXPECT_EQ(h.width, 9000);
    EXPECT_EQ(h.height, 9000);
    EXPECT_EQ(h.mode, PixelMode::kRGB);
    EXPECT_GE(h.decode_bytes, int64_t{9000} * 9000 * 3);
    // At an affordable size the same bytes decode, within the bound.
    const ImageHeader m = expect_consistent(with_size(1500, 1000), "webp 1500x1000 from 8x8 bytes");
    EXPECT_EQ(m.width, 1500);
}

TEST(ImageProbe, GifFrameOutsideTheScreenGrowsIt) {
    // Pillow 9.4 grows the logical screen to hold a frame that does not fit; so do the decoder and
    // the probe (the bound covers the grown canvas), and the limits apply to the grown size.
    Bytes gif = encode_gif(20, 10, 0, 0, 12, 6);
    gif[6] = 10, gif[7] = 0, gif[8] = 4, gif[9] = 0;   // screen 10 × 4 (the 12 × 6 frame at 0, 0)
    const ImageHeader h = expect_consistent(gif, "gif frame past the screen");
    EXPECT_EQ(h.width, 12);
    EXPECT_EQ(h.height, 6);
    DecodeLimits limits;
    limits.max_pixels = 60;   // the screen (40) fits, the grown canvas (72) does not
    EXPECT_THROW(probe_image(gif, limits), Error);
    EXPECT_THROW(decode_image(gif, limits), Error);
}

TEST(ImageProbe, WebpCanvasMismatchIsRefused) {
    Bytes webp = encode_webp(41, 27, true, false);   // VP8X + ALPH + VP8
    ASSERT_EQ(std::string(webp.begin() + 12, webp.begin() + 16), "VP8X");
    webp[24] = 41;   // canvas width - 1: 42 instead of 41
    expect_refused(webp, "webp canvas 42 wide, bitstream 41", "does not match");
    // An animated file whose first frame leaves the canvas is refused.
    Bytes anim = encode_webp_animated(41, 27, true);
    anim[24] = 20;   // canvas 21 wide
    expect_refused(anim, "webp frame outside the canvas", "outside the canvas");
}

TEST(ImageProbe, ApngFramesOutsideTheImageAreRefused) {
    const Bytes ok =
        make_png(20, 10, true, false, {{"acTL", {0, 0, 0, 1, 0, 0, 0, 0}}, {"fcTL", fctl(0, 20, 10, 0, 0)}});
    expect_consistent(ok, "apng");
    expect_refused(make_png(20, 10, true, false, {{"fcTL", fctl(0, 20, 10, 1, 0)}}), "fcTL before IDAT past the width",
                   "outside");
    expect_refused(make_png(20, 10, true, false, {{"fcTL", fctl(0, 0xffffffffu, 1, 2, 0)}}), "fcTL overflowing",
                   "outside");
    expect_refused(make_png(20, 10, true, false, {{"fcTL", {0, 0, 0, 0}}}), "truncated fcTL", "truncated");
    expect_refused(make_png(20, 10, true, false, {{"fcTL", fctl(3, 20, 10, 0, 0)}}), "fcTL out of sequence",
                   "sequence");
    expect_refused(make_png(20, 10, true, false, {{"fcTL", fctl(0, 20, 10, 0, 0)}}, {{"fcTL", fctl(1, 4, 11, 0, 0)}}),
                   "fcTL after IDAT past the height", "outside");
}

TEST(ImageProbe, TruncatedHeadersAreRefused) {
    const std::vector<std::pair<std::string, Bytes>> files = {
        {"png", encode_png(30, 20, PNG_FORMAT_RGB)}, {"jpeg", encode_jpeg(30, 20, 3, false, 6)},
        {"webp", encode_webp(30, 20, true, false)},  {"webp animated", encode_webp_animated(30, 20, true)},
        {"gif", encode_gif(30, 20, 0, 0, 30, 20)},   {"bmp", make_bmp(30, 20, true)},
    };
    for (const auto& [name, file] : files) {
        // Every prefix is refused or probed at the full file's size (never a crash, never another size).
        const ImageHeader full = probe_image(file);
        for (size_t n = 0; n < file.size(); ++n) {
            const Bytes prefix(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
            try {
                const ImageHeader h = probe_image(prefix);
                EXPECT_EQ(h.width, full.width) << name << " prefix " << n;
                EXPECT_EQ(h.height, full.height) << name << " prefix " << n;
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()), "") << name;
            }
        }
    }
    // Cut inside the header itself: always refused.
    const Bytes png = encode_png(30, 20, PNG_FORMAT_RGB);
    EXPECT_THROW(probe_image(Bytes(png.begin(), png.begin() + 20)), Error);   // inside IHDR
    const Bytes jpeg = encode_jpeg(30, 20, 3, false);
    EXPECT_THROW(probe_image(Bytes(jpeg.begin(), jpeg.begin() + 100)), Error);   // before SOS
    const Bytes gif = encode_gif(30, 20, 0, 0, 30, 20);
    EXPECT_THROW(probe_image(Bytes(gif.begin(), gif.begin() + 30)), Error);   // inside the colour table
    const Bytes webp = encode_webp(30, 20, false, true);
    EXPECT_THROW(probe_image(Bytes(webp.begin(), webp.begin() + 22)), Error);   // inside the VP8L header
    const Bytes bmp = make_bmp(30, 20, false);
    EXPECT_THROW(probe_image(Bytes(bmp.begin(), bmp.begin() + 30)), Error);   // inside the info header
    EXPECT_THROW(probe_image(Bytes{}), Error);
    EXPECT_THROW(probe_image(Bytes{'h', 'e', 'l', 'l', 'o'}), Error);
}

TEST(ImageProbe, LimitsApplyToTheProbedSize) {
    const Bytes jpeg = encode_jpeg(40, 24, 3, false, 6);   // 24 × 40 after the orientation
    DecodeLimits limits;
    limits.max_side = 39;
    EXPECT_THROW(probe_image(jpeg, limits), Error);
    limits.max_side = 40;
    limits.max_pixels = 959;
    EXPECT_THROW(probe_image(jpeg, limits), Error);
    limits.max_pixels = 960;
    EXPECT_NO_THROW(probe_image(jpeg, limits));
    // BMP RLE is refused from the header, like the decoder refuses it.
    Bytes rle = make_bmp(4, 4, true);
    rle[30] = 1;   // BI_RLE8
    expect_refused(rle, "bmp rle8", "RLE");
}

}   // namespace
}   // namespace kimi::image
