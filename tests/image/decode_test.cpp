// Decoder unit tests (also run under ASan + UBSan): magic sniffing, small hand-made and embedded
// files of every format with known pixels, EXIF orientation, limits checked before allocating, and
// every error path — each prefix of each small file, single corrupt bytes, zero and huge sizes —
// must end in a kimi::Error or a valid image, never a crash. The Pillow comparison is
// decode_pillow_test.py.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/decode.h"
#include "image/decode_internal.h"
#include "byte_writer.h"

namespace kimi::image {
namespace {

using namespace test;   // Bytes, put_*, png_chunk, zlib_stored (byte_writer.h)

// --- embedded files, written by Pillow 9.4 -------------------------------------------------------
// kJpegOrient6: 3×2 RGB, quality 95, EXIF orientation 6; kGifTrns: 3×2 P, indices {0,1,2,3,1,0},
// palette red/green/blue/(9,9,9), transparency 1; kWebpLossless: 3×2 RGBA; kWebpLossy: 3×2 RGB.
const uint8_t kJpegOrient6[] = {
    0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x00, 0xff, 0xe1, 0x00, 0x22, 0x45, 0x78, 0x69, 0x66, 0x00, 0x00, 0x4d, 0x4d, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x08,
    0x00, 0x01, 0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff,
    0xdb, 0x00, 0x43, 0x00, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02, 0x01, 0x01, 0x01, 0x02, 0x02, 0x02, 0x02, 0x02,
    0x04, 0x03, 0x02, 0x02, 0x02, 0x02, 0x05, 0x04, 0x04, 0x03, 0x04, 0x06, 0x05, 0x06, 0x06, 0x06, 0x05, 0x06, 0x06,
    0x06, 0x07, 0x09, 0x08, 0x06, 0x07, 0x09, 0x07, 0x06, 0x06, 0x08, 0x0b, 0x08, 0x09, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a,
    0x06, 0x08, 0x0b, 0x0c, 0x0b, 0x0a, 0x0c, 0x09, 0x0a, 0x0a, 0x0a, 0xff, 0xdb, 0x00, 0x43, 0x01, 0x02, 0x02, 0x02,
    0x02, 0x02, 0x02, 0x05, 0x03, 0x03, 0x05, 0x0a, 0x07, 0x06, 0x07, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a,
    0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a,
    0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a,
    0x0a, 0x0a, 0x0a, 0x0a, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x02, 0x00, 0x03, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11,
    0x01, 0x03, 0x11, 0x01, 0xff, 0xc4, 0x00, 0x1f, 0x00, 0x00, 0x01, 0x05, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0xff,
    0xc4, 0x00, 0xb5, 0x10, 0x00, 0x02, 0x01, 0x03, 0x03, 0x02, 0x04, 0x03, 0x05, 0x05, 0x04, 0x04, 0x00, 0x00, 0x01,
    0x7d, 0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07, 0x22, 0x71,
    0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72, 0x82,
    0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
    0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64,
    0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
    0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9,
    0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9,
    0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xff, 0xc4, 0x00, 0x1f, 0x01, 0x00, 0x03, 0x01,
    0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05,
    0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0xff, 0xc4, 0x00, 0xb5, 0x11, 0x00, 0x02, 0x01, 0x02, 0x04, 0x04, 0x03, 0x04,
    0x07, 0x05, 0x04, 0x04, 0x00, 0x01, 0x02, 0x77, 0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12,
    0x41, 0x51, 0x07, 0x61, 0x71, 0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33,
    0x52, 0xf0, 0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26, 0x27,
    0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54,
    0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77,
    0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,
    0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9,
    0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
    0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xff,
    0xda, 0x00, 0x0c, 0x03, 0x01, 0x00, 0x02, 0x11, 0x03, 0x11, 0x00, 0x3f, 0x00, 0xfa, 0x03, 0xf6, 0x76, 0xfd, 0x93,
    0xff, 0x00, 0x65, 0x99, 0x3e, 0x09, 0x78, 0x6d, 0xe4, 0xfd, 0x9a, 0xbc, 0x00, 0xcc, 0x74, 0xd5, 0xc9, 0x3e, 0x0d,
    0xb1, 0x24, 0xf2, 0x7f, 0xe9, 0x95, 0x14, 0x51, 0x5f, 0xcc, 0x95, 0x7f, 0x8b, 0x2f, 0x53, 0xfa, 0xd3, 0x83, 0x7f,
    0xe4, 0x90, 0xcb, 0xbf, 0xeb, 0xc5, 0x1f, 0xfd, 0x37, 0x13, 0xff, 0xd9};
const uint8_t kGifTrns[] = {0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x03, 0x00, 0x02, 0x00, 0x81, 0x00, 0x00, 0xff,
                            0x00, 0x00, 0x00, 0xff, 0x00, 0x00, 0x00, 0xff, 0x09, 0x09, 0x09, 0x21, 0xf9, 0x04,
                            0x01, 0x00, 0x00, 0x01, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x02, 0x00,
                            0x00, 0x08, 0x09, 0x00, 0x01, 0x04, 0x10, 0x30, 0x20, 0x00, 0x80, 0x80, 0x00, 0x3b};
const uint8_t kWebpLossless[] = {0x52, 0x49, 0x46, 0x46, 0x46, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56,
                                 0x50, 0x38, 0x4c, 0x39, 0x00, 0x00, 0x00, 0x2f, 0x02, 0x40, 0x00, 0x10, 0x2f,
                                 0x20, 0x16, 0x4c, 0x86, 0x95, 0xff, 0x15, 0xe2, 0x90, 0x29, 0x68, 0xdb, 0x86,
                                 0xe9, 0x25, 0x54, 0x4c, 0xc3, 0x3b, 0x4c, 0x0a, 0xda, 0xb6, 0x61, 0xda, 0x02,
                                 0x3f, 0xdb, 0x80, 0x2f, 0x00, 0xe8, 0x0f, 0x72, 0xcc, 0xfb, 0x77, 0x50, 0xc8,
                                 0x36, 0x02, 0x1c, 0xba, 0x57, 0xe8, 0x0c, 0x2e, 0xa2, 0xff, 0x71, 0xac, 0x00};
const uint8_t kWebpLossy[] = {0x52, 0x49, 0x46, 0x46, 0x46, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56,
                              0x50, 0x38, 0x20, 0x3a, 0x00, 0x00, 0x00, 0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a,
                              0x03, 0x00, 0x02, 0x00, 0x02, 0xc0, 0x4c, 0x25, 0xa8, 0x02, 0x74, 0xba, 0x00,
                              0x03, 0x08, 0xf4, 0x46, 0x92, 0x00, 0x00, 0xce, 0x3d, 0xfa, 0x15, 0xf3, 0xcc,
                              0xeb, 0xdf, 0x38, 0xbf, 0xa1, 0x4f, 0xb3, 0x87, 0x07, 0xbf, 0x96, 0x5a, 0x65,
                              0xeb, 0xfe, 0x87, 0x02, 0xae, 0xbb, 0xee, 0x3d, 0x7f, 0xd0, 0xa8, 0x00, 0x00};

Bytes to_bytes(const uint8_t* p, size_t n) { return Bytes(p, p + n); }

// --- hand-made PNG (stored deflate blocks) and BMP ----------------------------------------------

// A PNG with the given IHDR fields; `raw` is the filtered scanline data (filter bytes included).
Bytes make_png(uint32_t w, uint32_t h, uint8_t depth, uint8_t color_type, const Bytes& raw, const Bytes& plte = {},
               const Bytes& trns = {}) {
    Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    Bytes ihdr;
    put_be32(ihdr, w);
    put_be32(ihdr, h);
    ihdr.insert(ihdr.end(), {depth, color_type, 0, 0, 0});
    png_chunk(out, "IHDR", ihdr);
    if (!plte.empty()) png_chunk(out, "PLTE", plte);
    if (!trns.empty()) png_chunk(out, "tRNS", trns);
    png_chunk(out, "IDAT", zlib_stored(raw));
    png_chunk(out, "IEND", {});
    return out;
}

// 3×2 RGB: pixel (x, y) = (10x + y, 100 + x, 200 - y).
Bytes small_rgb_png() {
    Bytes raw;
    for (int y = 0; y < 2; ++y) {
        raw.push_back(0);
        for (int x = 0; x < 3; ++x) raw.insert(raw.end(), {uint8_t(10 * x + y), uint8_t(100 + x), uint8_t(200 - y)});
    }
    return make_png(3, 2, 8, 2, raw);
}

// A bottom-up 24-bit BMP of w×h with pixel (x, y) = (x, y, x + y) (R, G, B).
Bytes make_bmp24(int32_t w, int32_t h, bool top_down = false) {
    const uint32_t stride = (static_cast<uint32_t>(w) * 3 + 3) & ~3u;
    Bytes out = {'B', 'M'};
    put_le32(out, 54 + stride * static_cast<uint32_t>(h));
    put_le32(out, 0);
    put_le32(out, 54);
    put_le32(out, 40);
    put_le32(out, static_cast<uint32_t>(w));
    put_le32(out, static_cast<uint32_t>(top_down ? -h : h));
    put_le16(out, 1);
    put_le16(out, 24);
    for (int i = 0; i < 6; ++i) put_le32(out, 0);
    for (int32_t r = 0; r < h; ++r) {
        const int32_t y = top_down ? r : h - 1 - r;
        for (int32_t x = 0; x < w; ++x) out.insert(out.end(), {uint8_t(x + y), uint8_t(y), uint8_t(x)});
        for (uint32_t p = static_cast<uint32_t>(w) * 3; p < stride; ++p) out.push_back(0);
    }
    return out;
}

// Decoding must either succeed with a consistent image or throw kimi::Error.
void expect_error_or_image(const Bytes& bytes, const std::string& what) {
    try {
        const DecodedImage img = decode_image(bytes);
        EXPECT_GT(img.width, 0) << what;
        EXPECT_EQ(img.pixels.size(), detail::pixel_bytes(img.width, img.height, img.mode)) << what;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()), "") << what;
    }
}

std::vector<Bytes> small_valid_files() {
    Bytes bw;   // 1-bit PNG
    bw = make_png(9, 2, 1, 0, {0, 0xa5, 0x80, 0, 0x5a, 0x00});
    return {small_rgb_png(),
            bw,
            make_png(2, 2, 8, 3, {0, 0, 1, 0, 1, 0}, {1, 2, 3, 4, 5, 6}, {0}),
            make_png(2, 1, 16, 0, {0, 0x12, 0x34, 0xff, 0xfe}),
            make_bmp24(3, 2),
            to_bytes(kJpegOrient6, sizeof kJpegOrient6),
            to_bytes(kGifTrns, sizeof kGifTrns),
            to_bytes(kWebpLossless, sizeof kWebpLossless),
            to_bytes(kWebpLossy, sizeof kWebpLossy)};
}

// --- tests ----------------------------------------------------------------------------------------

TEST(ImageDecode, ModeNamesAndSizes) {
    EXPECT_STREQ(pixel_mode_name(PixelMode::k1), "1");
    EXPECT_STREQ(pixel_mode_name(PixelMode::kI16), "I;16");
    EXPECT_STREQ(pixel_mode_name(PixelMode::kCMYK), "CMYK");
    EXPECT_EQ(bytes_per_pixel(PixelMode::k1), 1);
    EXPECT_EQ(bytes_per_pixel(PixelMode::kLA), 2);
    EXPECT_EQ(bytes_per_pixel(PixelMode::kI16), 2);
    EXPECT_EQ(bytes_per_pixel(PixelMode::kRGB), 3);
    EXPECT_EQ(bytes_per_pixel(PixelMode::kCMYK), 4);
}

TEST(ImageDecode, SniffFormat) {
    EXPECT_STREQ(sniff_format(small_rgb_png()), "png");
    EXPECT_STREQ(sniff_format(to_bytes(kJpegOrient6, sizeof kJpegOrient6)), "jpeg");
    EXPECT_STREQ(sniff_format(to_bytes(kGifTrns, sizeof kGifTrns)), "gif");
    EXPECT_STREQ(sniff_format(to_bytes(kWebpLossless, sizeof kWebpLossless)), "webp");
    EXPECT_STREQ(sniff_format(make_bmp24(1, 1)), "bmp");
    EXPECT_STREQ(sniff_format(Bytes{}), "");
    EXPECT_STREQ(sniff_format(Bytes{'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'A', 'V', 'E'}), "");
    EXPECT_THROW(decode_image(Bytes{}), Error);
    EXPECT_THROW(decode_image(Bytes{'h', 'e', 'l', 'l', 'o'}), Error);
}

TEST(ImageDecode, PngRgb) {
    const DecodedImage img = decode_image(small_rgb_png());
    EXPECT_EQ(img.format, "png");
    ASSERT_EQ(img.mode, PixelMode::kRGB);
    ASSERT_EQ(img.width, 3);
    ASSERT_EQ(img.height, 2);
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 3; ++x) {
            const uint8_t* p = &img.pixels[static_cast<size_t>((y * 3 + x) * 3)];
            EXPECT_EQ(p[0], 10 * x + y);
            EXPECT_EQ(p[1], 100 + x);
            EXPECT_EQ(p[2], 200 - y);
        }
}

TEST(ImageDecode, PngPaletteWithTransparency) {
    const DecodedImage img = decode_image(make_png(2, 2, 8, 3, {0, 0, 1, 0, 1, 5}, {1, 2, 3, 4, 5, 6}, {0}));
    ASSERT_EQ(img.mode, PixelMode::kP);
    EXPECT_EQ(img.pixels, (Bytes{0, 1, 1, 5}));
    ASSERT_EQ(img.palette.size(), 1024u);
    EXPECT_EQ(Bytes(img.palette.begin(), img.palette.begin() + 8), (Bytes{1, 2, 3, 0, 4, 5, 6, 255}));
    EXPECT_EQ(Bytes(img.palette.begin() + 20, img.palette.begin() + 24), (Bytes{5, 5, 5, 255}));   // Pillow's ramp
    EXPECT_TRUE(img.has_transparency);
    EXPECT_EQ(img.transparent_value, 0);
}

TEST(ImageDecode, PngBilevelAndGrey16) {
    const DecodedImage bw = decode_image(make_png(9, 1, 1, 0, {0, 0xa5, 0x80}));
    ASSERT_EQ(bw.mode, PixelMode::k1);
    EXPECT_EQ(bw.pixels, (Bytes{255, 0, 255, 0, 0, 255, 0, 255, 255}));
    const DecodedImage g = decode_image(make_png(2, 1, 16, 0, {0, 0x12, 0x34, 0xff, 0xfe}, {}, {0xff, 0xfe}));
    ASSERT_EQ(g.mode, PixelMode::kI16);
    uint16_t v[2];
    std::memcpy(v, g.pixels.data(), 4);
    EXPECT_EQ(v[0], 0x1234);
    EXPECT_EQ(v[1], 0xfffe);
    EXPECT_TRUE(g.has_transparency);
    EXPECT_EQ(g.transparent_value, 0xfffe);
}

TEST(ImageDecode, BmpBottomUpAndTopDown) {
    for (bool top_down : {false, true}) {
        const DecodedImage img = decode_image(make_bmp24(5, 3, top_down));
        ASSERT_EQ(img.mode, PixelMode::kRGB);
        ASSERT_EQ(img.width, 5);
        ASSERT_EQ(img.height, 3);
        for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 5; ++x) {
                const uint8_t* p = &img.pixels[static_cast<size_t>((y * 5 + x) * 3)];
                EXPECT_EQ(p[0], x);
                EXPECT_EQ(p[1], y);
                EXPECT_EQ(p[2], x + y);
            }
    }
}

TEST(ImageDecode, GifFirstFrameWithTransparency) {
    const DecodedImage img = decode_image(to_bytes(kGifTrns, sizeof kGifTrns));
    EXPECT_EQ(img.format, "gif");
    ASSERT_EQ(img.mode, PixelMode::kP);
    EXPECT_EQ(img.pixels, (Bytes{0, 1, 2, 3, 1, 0}));
    EXPECT_TRUE(img.has_transparency);
    EXPECT_EQ(img.transparent_value, 1);
    EXPECT_EQ(Bytes(img.palette.begin(), img.palette.begin() + 16),
              (Bytes{255, 0, 0, 255, 0, 255, 0, 0, 0, 0, 255, 255, 9, 9, 9, 255}));
}

TEST(ImageDecode, WebpLosslessAndLossy) {
    const DecodedImage img = decode_image(to_bytes(kWebpLossless, sizeof kWebpLossless));
    ASSERT_EQ(img.mode, PixelMode::kRGBA);
    EXPECT_EQ(img.pixels,
              (Bytes{0, 0, 5, 255, 100, 0, 5, 128, 0, 0, 0, 0, 0, 200, 5, 1, 100, 200, 55, 2, 200, 200, 105, 3}));
    const DecodedImage lossy = decode_image(to_bytes(kWebpLossy, sizeof kWebpLossy));
    EXPECT_EQ(lossy.mode, PixelMode::kRGB);
    EXPECT_EQ(lossy.width, 3);
    EXPECT_EQ(lossy.height, 2);
}

TEST(ImageDecode, JpegExifOrientationIsApplied) {
    const DecodedImage img = decode_image(to_bytes(kJpegOrient6, sizeof kJpegOrient6));
    EXPECT_EQ(img.format, "jpeg");
    EXPECT_EQ(img.mode, PixelMode::kRGB);
    EXPECT_EQ(img.width, 2);   // 3×2 rotated by orientation 6
    EXPECT_EQ(img.height, 3);
}

TEST(ImageDecode, ExifOrientationParser) {
    // II, IFD0 at 8 with one entry 0x0112 SHORT 1 = 8.
    Bytes le = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 8, 0, 0, 0};
    EXPECT_EQ(detail::exif_orientation(le), 8);
    Bytes be = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 3, 0, 0};
    EXPECT_EQ(detail::exif_orientation(be), 3);
    for (size_t n = 0; n < le.size(); ++n) EXPECT_EQ(detail::exif_orientation(std::span(le).first(n)), 1) << n;
    le[24] = 9;   // out of range
    EXPECT_EQ(detail::exif_orientation(le), 1);
    be[13] = 0xff;   // IFD offset past the end
    EXPECT_EQ(detail::exif_orientation(be), 1);
}

TEST(ImageDecode, ApplyOrientation) {
    // 3×2 L image: a b c / d e f, and the results of exif_transpose for 1..8.
    const Bytes src = {'a', 'b', 'c', 'd', 'e', 'f'};
    const char* want[9] = {"", "abcdef", "cbafed", "fedcba", "defabc", "adbecf", "daebfc", "fcebda", "cfbead"};
    for (int o = 1; o <= 8; ++o) {
        DecodedImage img;
        img.width = 3, img.height = 2, img.mode = PixelMode::kL, img.pixels = src;
        detail::apply_orientation(img, o);
        EXPECT_EQ(std::string(img.pixels.begin(), img.pixels.end()), want[o]) << o;
        EXPECT_EQ(img.width, o >= 5 ? 2 : 3) << o;
    }
}

TEST(ImageDecode, EveryPrefixIsAnErrorOrAnImage) {
    for (const Bytes& file : small_valid_files()) {
        for (size_t n = 0; n < file.size(); ++n) {
            const Bytes prefix(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
            expect_error_or_image(prefix, std::string(sniff_format(file)) + " prefix " + std::to_string(n));
        }
    }
    // The header alone is never enough.
    const Bytes png = small_rgb_png();
    EXPECT_THROW(decode_image(Bytes(png.begin(), png.begin() + 40)), Error);
    const Bytes jpeg = to_bytes(kJpegOrient6, sizeof kJpegOrient6);
    EXPECT_THROW(decode_image(Bytes(jpeg.begin(), jpeg.end() - 2)), Error);   // no EOI: Pillow fails too
}

TEST(ImageDecode, CorruptBytesAreAnErrorOrAnImage) {
    for (const Bytes& file : small_valid_files()) {
        for (size_t i = 0; i < file.size(); ++i) {
            for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, static_cast<uint8_t>(file[i] ^ 0x55)}) {
                Bytes bad = file;
                bad[i] = v;
                expect_error_or_image(bad, std::string(sniff_format(file)) + " byte " + std::to_string(i));
            }
        }
    }
}

TEST(ImageDecode, ZeroSizesAreErrors) {
    EXPECT_THROW(decode_image(make_png(0, 2, 8, 2, {0})), Error);
    EXPECT_THROW(decode_image(make_bmp24(0, 2)), Error);
    EXPECT_THROW(decode_image(make_bmp24(2, 0)), Error);
    Bytes gif = to_bytes(kGifTrns, sizeof kGifTrns);
    gif[6] = gif[7] = 0;   // screen width 0
    EXPECT_THROW(decode_image(gif), Error);
}

TEST(ImageDecode, HugeSizesFailOnTheLimitsBeforeAllocating) {
    const auto t0 = std::chrono::steady_clock::now();
    auto expect_limit = [](const Bytes& bytes, const char* what) {
        try {
            decode_image(bytes);
            ADD_FAILURE() << what << ": decoded";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("exceeds"), std::string::npos) << what << ": " << e.what();
        }
    };
    expect_limit(make_png(100000, 100000, 8, 2, {0, 1, 2, 3}), "png 100000x100000");
    expect_limit(make_png(60000, 60000, 8, 6, {0, 1, 2, 3}), "png 60000x60000");
    Bytes bmp = make_bmp24(1, 1);
    bmp[18] = 0xff, bmp[19] = 0xff, bmp[20] = 0, bmp[22] = 0xff, bmp[23] = 0xff;   // 65535 × 65535
    expect_limit(bmp, "bmp 65535x65535");
    Bytes gif = to_bytes(kGifTrns, sizeof kGifTrns);
    gif[6] = gif[7] = gif[8] = gif[9] = 0xff;   // screen 65535 × 65535
    expect_limit(gif, "gif screen 65535x65535");
    Bytes jpeg = to_bytes(kJpegOrient6, sizeof kJpegOrient6);
    for (size_t i = 0; i + 8 < jpeg.size(); ++i)
        if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {   // SOF0: height, width at +5, +7
            jpeg[i + 5] = jpeg[i + 7] = 0xff;
            jpeg[i + 6] = jpeg[i + 8] = 0x00;
            break;
        }
    expect_limit(jpeg, "jpeg 65280x65280");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(seconds, 5.0);
    // Custom limits.
    DecodeLimits small;
    small.max_pixels = 5;
    EXPECT_THROW(decode_image(small_rgb_png(), small), Error);
    small.max_pixels = 6;
    small.max_side = 2;
    EXPECT_THROW(decode_image(small_rgb_png(), small), Error);
    small.max_side = 3;
    EXPECT_NO_THROW(decode_image(small_rgb_png(), small));
}

}   // namespace
}   // namespace kimi::image
