// The K3 image preprocessing without Pillow: geometry against hand-computed values, config
// parsing and its errors, resize invariants (constants stay constant, sizes, nearest picks input
// pixels), the background composite and the patch layout. Byte-identity with Pillow is
// preprocess_pillow_test.py's job.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "image/preprocess.h"

namespace kimi::image {
namespace {

using nlohmann::json;

DecodedImage make_image(PixelMode mode, int32_t w, int32_t h, int bpp, uint8_t fill) {
    DecodedImage img;
    img.width = w;
    img.height = h;
    img.mode = mode;
    img.pixels.assign(static_cast<size_t>(w) * static_cast<size_t>(h) * static_cast<size_t>(bpp), fill);
    if (mode == PixelMode::kP) {
        img.palette.resize(1024);
        for (size_t i = 0; i < 256; ++i) {
            img.palette[4 * i] = static_cast<uint8_t>(i);
            img.palette[4 * i + 1] = static_cast<uint8_t>(255 - i);
            img.palette[4 * i + 2] = static_cast<uint8_t>(i / 2);
            img.palette[4 * i + 3] = 255;
        }
    }
    return img;
}

void expect_geometry(int32_t w, int32_t h, const MediaConfig& c, int32_t nw, int32_t nh, int32_t pw, int32_t ph,
                     int32_t gh, int32_t gw, int64_t tokens) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    const ImageGeometry g = image_geometry(w, h, c);
    EXPECT_EQ(g.width, w);
    EXPECT_EQ(g.height, h);
    EXPECT_EQ(g.new_width, nw);
    EXPECT_EQ(g.new_height, nh);
    EXPECT_EQ(g.pad_width, pw);
    EXPECT_EQ(g.pad_height, ph);
    EXPECT_EQ(g.grid_h, gh);
    EXPECT_EQ(g.grid_w, gw);
    EXPECT_EQ(g.n_tokens, tokens);
}

// ---- geometry ----

TEST(ImageGeometry, HandComputedDefaults) {
    const MediaConfig c;   // patch 14, merge 2 (factor 28), 65536 patches, 512 per side (7168 px)
    // No resize below the budget; pad to a multiple of 28.
    expect_geometry(1, 1, c, 1, 1, 27, 27, 2, 2, 1);
    expect_geometry(13, 200, c, 13, 200, 15, 24, 16, 2, 8);
    expect_geometry(14, 14, c, 14, 14, 14, 14, 2, 2, 1);
    expect_geometry(29, 57, c, 29, 57, 27, 27, 6, 4, 6);
    // 285 · 214 = 60990 patches ≤ 65536: kept.
    expect_geometry(4000, 3000, c, 4000, 3000, 4, 24, 216, 286, 15444);
    // The side limit: scale = 7168 / 10000; int(300 · 0.7168) = 215 → pad 9.
    expect_geometry(10000, 300, c, 7168, 215, 0, 9, 16, 512, 2048);
    expect_geometry(8000, 500, c, 7168, 448, 0, 0, 32, 512, 4096);
    // The patch budget: sqrt(65536 / (357 · 214)) = 0.92619…: 4630.9 → 4630, 2778.5 → 2778.
    expect_geometry(5000, 3000, c, 4630, 2778, 18, 22, 200, 332, 16600);
    // sqrt(65536 / 4678²) · 65500 = 3584.0…
    expect_geometry(65500, 65500, c, 3584, 3584, 0, 0, 256, 256, 16384);
}

TEST(ImageGeometry, LoweredBudget) {
    MediaConfig c;
    c.in_patch_limit = 1024;   // sqrt(1024 / (214 · 142)) = 0.18352…
    expect_geometry(3000, 2000, c, 550, 367, 10, 25, 28, 40, 280);
    c.in_patch_limit = 1;   // a one-patch budget still keeps at least one pixel per side
    const ImageGeometry g = image_geometry(65500, 1, c);
    EXPECT_GE(g.new_width, 1);
    EXPECT_EQ(g.new_height, 1);
}

TEST(ImageGeometry, Invariants) {
    MediaConfig c;
    c.patch_size = 7;
    c.merge_kernel_size = 3;
    c.in_patch_limit = 300;
    c.patch_limit_on_one_side = 40;
    for (int32_t w : {1, 2, 6, 7, 8, 20, 21, 22, 99, 280, 281, 1000, 5001}) {
        for (int32_t h : {1, 5, 7, 13, 64, 200, 777, 4000}) {
            const ImageGeometry g = image_geometry(w, h, c);
            EXPECT_GE(g.new_width, 1);
            EXPECT_LE(g.new_width, w);
            EXPECT_LE(g.new_width, 40 * 7);
            EXPECT_LE(g.new_height, h);
            EXPECT_EQ((g.new_width + g.pad_width) % 21, 0);
            EXPECT_EQ((g.new_height + g.pad_height) % 21, 0);
            EXPECT_LT(g.pad_width, 21);
            EXPECT_EQ(g.grid_w * 7, g.new_width + g.pad_width);
            EXPECT_EQ(int64_t{g.grid_h} * g.grid_w, g.n_tokens * 9);
        }
    }
}

TEST(ImageGeometry, BadInput) {
    const MediaConfig c;
    EXPECT_THROW(image_geometry(0, 10, c), Error);
    EXPECT_THROW(image_geometry(10, -1, c), Error);
    MediaConfig bad;
    bad.patch_size = 0;
    EXPECT_THROW(image_geometry(10, 10, bad), Error);
    bad = MediaConfig{};
    bad.in_patch_limit = 0;
    EXPECT_THROW(image_geometry(10, 10, bad), Error);
}

// ---- config ----

MediaConfig parse(const std::string& media_proc_cfg) {
    return parse_media_config(json::parse("{\"media_proc_cfg\": " + media_proc_cfg + "}"), "cfg.json");
}

std::string parse_error(const std::string& media_proc_cfg) {
    try {
        parse(media_proc_cfg);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(MediaConfig, DefaultsAndFullParse) {
    const MediaConfig d = parse("{}");
    EXPECT_EQ(d.patch_size, 14);
    EXPECT_EQ(d.merge_kernel_size, 2);
    EXPECT_EQ(d.in_patch_limit, 65536);
    EXPECT_TRUE(d.has_transparent_bg);
    EXPECT_TRUE(d.fill_after_resize);

    const MediaConfig c = parse(R"({
        "patch_size": 16, "merge_kernel_size": [2, 2], "in_patch_limit": 16384, "patch_limit_on_one_side": 256,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": 0.25,
        "transparent_bg_config": {"pattern": "chessboard", "chessboard_square_size": 16,
                                  "chessboard_square_on_top_left": false, "chessboard_white_value": 250,
                                  "chessboard_gray_value": 100},
        "transparent_bg_fill_stage": "before_resize", "fixed_output_tokens": null,
        "in_patch_limit_each_frame": 4096, "sample_fps": 2.0, "temporal_merge_kernel_size": 4,
        "max_num_frames_each_video": null, "config_type": "media"})");
    EXPECT_EQ(c.patch_size, 16);
    EXPECT_EQ(c.merge_kernel_size, 2);
    EXPECT_EQ(c.in_patch_limit, 16384);
    EXPECT_EQ(c.patch_limit_on_one_side, 256);
    EXPECT_EQ(c.image_mean[0], 0.48145466f);
    EXPECT_EQ(c.image_mean[2], 0.40821073f);
    EXPECT_EQ(c.image_std[1], 0.25f);
    EXPECT_EQ(c.image_std_exact[1], 0.25);
    EXPECT_EQ(c.chessboard_square_size, 16);
    EXPECT_FALSE(c.chessboard_square_on_top_left);
    EXPECT_EQ(c.chessboard_white_value, 250);
    EXPECT_EQ(c.chessboard_gray_value, 100);
    EXPECT_FALSE(c.fill_after_resize);
    EXPECT_EQ(c.patch_dim(), 768);

    EXPECT_FALSE(parse(R"({"transparent_bg_config": null})").has_transparent_bg);
    EXPECT_EQ(parse(R"({"transparent_bg_config": {"pattern": "white"}})").bg_pattern, "white");
    EXPECT_EQ(parse(R"({"merge_kernel_size": 3})").merge_kernel_size, 3);
}

TEST(MediaConfig, Errors) {
    EXPECT_THROW(parse_media_config(json::array(), "x.json"), Error);
    EXPECT_THROW(parse_media_config(json::object(), "x.json"), Error);
    EXPECT_THROW(parse_media_config(json{{"media_proc_cfg", 3}}, "x.json"), Error);
    const struct {
        const char* cfg;
        const char* key;
    } cases[] = {
        {R"({"patch_size": 0})", "patch_size"},
        {R"({"patch_size": "14"})", "patch_size"},
        {R"({"patch_size": 14.5})", "patch_size"},
        {R"({"patch_size": null})", "patch_size"},
        {R"({"merge_kernel_size": [2, 3]})", "merge_kernel_size"},
        {R"({"merge_kernel_size": [2, 2, 2]})", "merge_kernel_size"},
        {R"({"merge_kernel_size": 0})", "merge_kernel_size"},
        {R"({"in_patch_limit": -1})", "in_patch_limit"},
        {R"({"in_patch_limit": 18446744073709551615})", "in_patch_limit"},
        {R"({"patch_limit_on_one_side": 0})", "patch_limit_on_one_side"},
        {R"({"image_mean": [0.5, 0.5]})", "image_mean"},
        {R"({"image_mean": "0.5"})", "image_mean"},
        {R"({"image_std": [0.5, 0, 0.5]})", "image_std"},
        {R"({"image_std": -1})", "image_std"},
        {R"({"image_std": 1e-300})", "image_std"},
        {R"({"fixed_output_tokens": 256})", "fixed_output_tokens"},
        {R"({"transparent_bg_fill_stage": "during_resize"})", "transparent_bg_fill_stage"},
        {R"({"transparent_bg_config": 1})", "transparent_bg_config"},
        {R"({"transparent_bg_config": {"pattern": "checker"}})", "pattern"},
        {R"({"transparent_bg_config": {"chessboard_square_size": 0}})", "chessboard_square_size"},
        {R"({"transparent_bg_config": {"chessboard_white_value": 256}})", "chessboard_white_value"},
        {R"({"transparent_bg_config": {"chessboard_gray_value": -1}})", "chessboard_gray_value"},
        {R"({"transparent_bg_config": {"chessboard_square_on_top_left": 1}})", "chessboard_square_on_top_left"},
        {R"({"transparent_bg_config": {"colour": "red"}})", "colour"},
    };
    for (const auto& c : cases) {
        const std::string msg = parse_error(c.cfg);
        EXPECT_NE(msg.find("cfg.json"), std::string::npos) << c.cfg << " -> " << msg;
        EXPECT_NE(msg.find(c.key), std::string::npos) << c.cfg << " -> " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

// ---- resize ----

TEST(ResizeImage, ConstantsStayConstant) {
    const struct {
        PixelMode mode;
        int bpp;
    } modes[] = {{PixelMode::kL, 1}, {PixelMode::kRGB, 3}, {PixelMode::kCMYK, 4}, {PixelMode::kP, 1},
                 {PixelMode::k1, 1}, {PixelMode::kLA, 2},  {PixelMode::kRGBA, 4}};
    const int32_t sizes[][4] = {{1, 1, 5, 3}, {13, 200, 7, 50}, {64, 48, 64, 13}, {10, 10, 31, 10}, {300, 2, 17, 9}};
    for (const auto& m : modes) {
        for (const auto& s : sizes) {
            const uint8_t v = m.mode == PixelMode::k1 ? 255 : 201;
            const DecodedImage img = make_image(m.mode, s[0], s[1], m.bpp, v);
            const DecodedImage r = resize_image(img, s[2], s[3]);
            ASSERT_EQ(r.width, s[2]);
            ASSERT_EQ(r.height, s[3]);
            ASSERT_EQ(r.mode, m.mode);
            ASSERT_EQ(r.pixels.size(), static_cast<size_t>(s[2]) * static_cast<size_t>(s[3]) * m.bpp);
            if (m.mode == PixelMode::kLA || m.mode == PixelMode::kRGBA) {
                // Premultiplied and back (Pillow's RGBa / La): 201 · 201 / 255 → 158 → 255 · 158 / 201 → 200.
                for (size_t i = 0; i < r.pixels.size(); ++i) ASSERT_EQ(r.pixels[i], (i + 1) % m.bpp ? 200 : 201);
            } else {
                for (uint8_t px : r.pixels) ASSERT_EQ(px, v) << static_cast<int>(m.mode);
            }
            EXPECT_EQ(r.palette, img.palette);
        }
    }
}

TEST(ResizeImage, SameSizeIsACopyAndNearestPicksInputPixels) {
    DecodedImage img = make_image(PixelMode::kP, 9, 5, 1, 0);
    for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 5);
    img.has_transparency = true;
    const DecodedImage same = resize_image(img, 9, 5);
    EXPECT_EQ(same.pixels, img.pixels);
    const DecodedImage up = resize_image(img, 20, 11);
    EXPECT_TRUE(up.has_transparency);
    for (uint8_t px : up.pixels) EXPECT_EQ(px % 5, 0);
    // Upscaling by an integer factor repeats each pixel.
    const DecodedImage twice = resize_image(img, 18, 10);
    for (int32_t y = 0; y < 10; ++y) {
        for (int32_t x = 0; x < 18; ++x) EXPECT_EQ(twice.pixels[y * 18 + x], img.pixels[(y / 2) * 9 + x / 2]);
    }
}

TEST(ResizeImage, BicubicRingsAndClips) {
    // A hard 0/255 edge overshoots on both sides; the 8-bit result is clipped, never wrapped.
    DecodedImage img = make_image(PixelMode::kL, 8, 1, 1, 0);
    for (int x = 4; x < 8; ++x) img.pixels[x] = 255;
    const DecodedImage r = resize_image(img, 29, 3);
    for (int32_t y = 0; y < 3; ++y) {
        for (int32_t x = 1; x < 29; ++x) EXPECT_GE(r.pixels[y * 29 + x], r.pixels[y * 29 + x - 1]);
        EXPECT_EQ(r.pixels[y * 29], 0);
        EXPECT_EQ(r.pixels[y * 29 + 28], 255);
    }
    // 16-bit grey resizes in its own range and comes back as L clipped to 8 bits.
    DecodedImage g16 = make_image(PixelMode::kI16, 6, 4, 2, 0);
    for (size_t i = 0; i < 24; ++i) {
        const uint16_t v = i % 2 ? 60000 : 100;
        std::memcpy(&g16.pixels[2 * i], &v, 2);
    }
    g16.has_transparency = true;
    g16.transparent_value = 300;
    const DecodedImage r16 = resize_image(g16, 3, 2);
    EXPECT_EQ(r16.mode, PixelMode::kL);
    EXPECT_EQ(r16.pixels.size(), 6u);
    EXPECT_EQ(r16.transparent_value, 300 & 0xff);
}

TEST(ResizeImage, BadImages) {
    DecodedImage img = make_image(PixelMode::kRGB, 4, 4, 3, 0);
    img.pixels.pop_back();
    EXPECT_THROW(resize_image(img, 2, 2), Error);
    DecodedImage p = make_image(PixelMode::kP, 4, 4, 1, 0);
    p.palette.resize(768);
    EXPECT_THROW(resize_image(p, 2, 2), Error);
    EXPECT_THROW(resize_image(make_image(PixelMode::kL, 4, 4, 1, 0), 0, 2), Error);
    DecodedImage empty;
    EXPECT_THROW(prepare_image(empty, MediaConfig{}), Error);
}

// ---- prepare ----

TEST(PrepareImage, PatchLayoutAndPadding) {
    MediaConfig c;
    c.patch_size = 2;
    c.merge_kernel_size = 2;   // factor 4
    DecodedImage img = make_image(PixelMode::kRGB, 5, 3, 3, 0);
    for (int32_t y = 0; y < 3; ++y) {
        for (int32_t x = 0; x < 5; ++x) {
            uint8_t* px = &img.pixels[(y * 5 + x) * 3];
            px[0] = static_cast<uint8_t>(10 * x);
            px[1] = static_cast<uint8_t>(10 * y);
            px[2] = 255;
        }
    }
    const PreparedImage p = prepare_image(img, c);
    EXPECT_EQ(p.geom.new_width, 5);
    EXPECT_EQ(p.geom.pad_width, 3);
    EXPECT_EQ(p.geom.pad_height, 1);
    EXPECT_EQ(p.geom.grid_w, 4);
    EXPECT_EQ(p.geom.grid_h, 2);
    EXPECT_EQ(p.geom.n_tokens, 2);
    ASSERT_EQ(p.rgb.size(), 8u * 4u * 3u);
    ASSERT_EQ(p.patches.size(), 8u * 12u);
    auto norm = [](uint8_t v) { return (static_cast<float>(v / 255.0) - 0.5f) * 2.0f; };
    for (int32_t y = 0; y < 4; ++y) {
        for (int32_t x = 0; x < 8; ++x) {
            for (int ch = 0; ch < 3; ++ch) {
                const uint8_t want = (x < 5 && y < 3) ? img.pixels[(y * 5 + x) * 3 + ch] : 0;
                EXPECT_EQ(p.rgb[(y * 8 + x) * 3 + ch], want);
                const size_t patch = static_cast<size_t>((y / 2) * 4 + x / 2);
                EXPECT_EQ(p.patches[patch * 12 + ch * 4 + (y % 2) * 2 + x % 2], norm(want));
            }
        }
    }
    EXPECT_EQ(p.patches.back(), -1.0f);   // padding: (0 − 0.5) · 2
}

TEST(PrepareImage, TransparentBackground) {
    MediaConfig c;   // chessboard 8, white 255, gray 180 where (y/8 + x/8) % 2 == 1
    DecodedImage img = make_image(PixelMode::kRGBA, 28, 28, 4, 0);   // fully transparent black
    PreparedImage p = prepare_image(img, c);
    auto at = [&](int x, int y) { return p.rgb[(y * 28 + x) * 3]; };
    EXPECT_EQ(at(0, 0), 255);
    EXPECT_EQ(at(8, 0), 180);
    EXPECT_EQ(at(0, 8), 180);
    EXPECT_EQ(at(9, 9), 255);
    c.chessboard_square_on_top_left = false;
    p = prepare_image(img, c);
    EXPECT_EQ(at(0, 0), 180);
    c.bg_pattern = "gray";
    p = prepare_image(img, c);
    EXPECT_EQ(at(5, 17), 128);
    // Opaque pixels are kept as they are; no background config drops alpha.
    for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = i % 4 == 3 ? 255 : 77;
    p = prepare_image(img, c);
    EXPECT_EQ(at(3, 3), 77);
    img.pixels[3] = 0;
    c.has_transparent_bg = false;
    p = prepare_image(img, c);
    EXPECT_EQ(at(0, 0), 77);
    // A palette with a transparent entry composites through its alpha; L with a tRNS grey value too.
    DecodedImage pal = make_image(PixelMode::kP, 28, 28, 1, 7);
    pal.palette[4 * 7 + 3] = 0;
    pal.has_transparency = true;
    c = MediaConfig{};
    p = prepare_image(pal, c);
    EXPECT_EQ(at(0, 0), 255);
    EXPECT_EQ(at(8, 0), 180);
    DecodedImage grey = make_image(PixelMode::kL, 28, 28, 1, 42);
    grey.has_transparency = true;
    grey.transparent_value = 42;
    p = prepare_image(grey, c);
    EXPECT_EQ(at(8, 0), 180);
    grey.transparent_value = 43;
    p = prepare_image(grey, c);
    EXPECT_EQ(at(8, 0), 42);
}

TEST(PrepareImage, DownscaleAllModes) {
    MediaConfig c;
    c.in_patch_limit = 16;
    c.fill_after_resize = false;
    const struct {
        PixelMode mode;
        int bpp;
    } modes[] = {{PixelMode::kL, 1}, {PixelMode::kRGB, 3}, {PixelMode::kCMYK, 4}, {PixelMode::kP, 1},
                 {PixelMode::k1, 1}, {PixelMode::kLA, 2},  {PixelMode::kRGBA, 4}, {PixelMode::kI16, 2}};
    for (bool after : {false, true}) {
        c.fill_after_resize = after;
        for (const auto& m : modes) {
            const PreparedImage p = prepare_image(make_image(m.mode, 300, 170, m.bpp, 255), c);
            EXPECT_LT(p.geom.new_width, 300);
            EXPECT_EQ(p.rgb.size(), static_cast<size_t>(p.geom.grid_h) * p.geom.grid_w * 14 * 14 * 3);
            EXPECT_EQ(p.patches.size(), static_cast<size_t>(p.geom.grid_h) * p.geom.grid_w * 588);
        }
    }
}

}   // namespace
}   // namespace kimi::image
