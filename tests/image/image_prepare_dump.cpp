// image_prepare_dump: one image → its K3 preprocessing, for the Pillow comparison
// (tests/image/preprocess_pillow_test.py).
//   image_prepare_dump [--raw W H MODE [--trns V]] IN OUT.bin [--config preprocessor_config.json]
// IN is an image file for decode_image, or with --raw the Pillow tobytes() of a W×H image in MODE
// ("1" bit-packed, "L", "LA", "P" with IN.palette of 768 RGB or 1024 RGBA bytes, "RGB", "RGBA",
// "CMYK", "I;16" little-endian); --trns V is info["transparency"] of a "1" / "L" / "I;16" image.
// Writes the padded uint8 RGB to OUT.bin, the float32 patches to OUT.bin.patches and prints the
// geometry as one JSON line; errors print `image_prepare_dump: <message>` and exit 1.
// --resize NW NH instead writes only Pillow's image.resize((NW, NH), BICUBIC) in the image's mode
// (resize_image) to OUT.bin, for the resampling checks beyond what the budget ever asks for.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "image/decode.h"
#include "image/preprocess.h"

namespace {

using kimi::Error;
using kimi::image::DecodedImage;
using kimi::image::PixelMode;

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open " + path);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const void* data, size_t n) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    if (!f) throw Error("cannot write " + path);
}

int32_t parse_int(const std::string& s, const char* what) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < 0 || v > INT32_MAX) throw Error(std::string("bad ") + what + ": " + s);
    return static_cast<int32_t>(v);
}

DecodedImage raw_image(const std::vector<uint8_t>& bytes, int32_t w, int32_t h, const std::string& mode,
                       const std::string& in_path, int32_t trns) {
    DecodedImage img;
    img.width = w;
    img.height = h;
    const size_t n = static_cast<size_t>(w) * static_cast<size_t>(h);
    auto expect = [&](size_t size) {
        if (bytes.size() != size) {
            throw Error(in_path + ": " + std::to_string(bytes.size()) + " bytes for a " + std::to_string(w) + "x" +
                        std::to_string(h) + " " + mode + " image (expected " + std::to_string(size) + ")");
        }
    };
    if (mode == "1") {   // rows of ceil(w / 8) bytes, most significant bit first
        const size_t stride = (static_cast<size_t>(w) + 7) / 8;
        expect(stride * static_cast<size_t>(h));
        img.mode = PixelMode::k1;
        img.pixels.resize(n);
        for (size_t y = 0; y < static_cast<size_t>(h); ++y) {
            for (size_t x = 0; x < static_cast<size_t>(w); ++x) {
                const bool bit = (bytes[y * stride + x / 8] >> (7 - x % 8)) & 1;
                img.pixels[y * static_cast<size_t>(w) + x] = bit ? 255 : 0;
            }
        }
    } else if (mode == "I;16") {
        expect(2 * n);
        img.mode = PixelMode::kI16;
        img.pixels.resize(2 * n);
        for (size_t i = 0; i < n; ++i) {
            const uint16_t v = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
            std::memcpy(&img.pixels[2 * i], &v, 2);
        }
    } else {
        const struct {
            const char* name;
            PixelMode mode;
            size_t bpp;
        } modes[] = {{"L", PixelMode::kL, 1},     {"LA", PixelMode::kLA, 2},     {"P", PixelMode::kP, 1},
                     {"RGB", PixelMode::kRGB, 3}, {"RGBA", PixelMode::kRGBA, 4}, {"CMYK", PixelMode::kCMYK, 4}};
        bool found = false;
        for (const auto& m : modes) {
            if (mode == m.name) {
                expect(m.bpp * n);
                img.mode = m.mode;
                img.pixels = bytes;
                found = true;
            }
        }
        if (!found) throw Error("unknown raw mode " + mode);
    }
    if (img.mode == PixelMode::kP) {
        const std::vector<uint8_t> pal = read_file(in_path + ".palette");
        if (pal.size() != 768 && pal.size() != 1024) throw Error(in_path + ".palette: need 768 or 1024 bytes");
        const size_t step = pal.size() / 256;
        img.palette.resize(1024);
        for (size_t i = 0; i < 256; ++i) {
            for (size_t c = 0; c < 3; ++c) img.palette[4 * i + c] = pal[step * i + c];
            img.palette[4 * i + 3] = step == 4 ? pal[4 * i + 3] : 255;
            if (img.palette[4 * i + 3] != 255) img.has_transparency = true;
        }
    }
    if (trns >= 0) {
        if (img.mode != PixelMode::k1 && img.mode != PixelMode::kL && img.mode != PixelMode::kI16) {
            throw Error("--trns applies to modes 1, L and I;16");
        }
        img.has_transparency = true;
        img.transparent_value = trns;
    }
    return img;
}

int run(int argc, char** argv) {
    std::vector<std::string> pos;
    std::string config_path, raw_mode;
    int32_t raw_w = -1, raw_h = -1, trns = -1, resize_w = -1, resize_h = -1;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--raw" && i + 3 < argc) {
            raw_w = parse_int(argv[i + 1], "width");
            raw_h = parse_int(argv[i + 2], "height");
            raw_mode = argv[i + 3];
            i += 3;
        } else if (a == "--resize" && i + 2 < argc) {
            resize_w = parse_int(argv[i + 1], "width");
            resize_h = parse_int(argv[i + 2], "height");
            i += 2;
        } else if (a == "--config" && i + 1 < argc) {
            config_path = argv[++i];
        } else if (a == "--trns" && i + 1 < argc) {
            trns = parse_int(argv[++i], "transparency");
        } else if (a.rfind("--", 0) == 0) {
            throw Error("unknown option " + a);
        } else {
            pos.push_back(a);
        }
    }
    if (pos.size() != 2) {
        std::fprintf(stderr,
                     "usage: image_prepare_dump [--raw W H MODE [--trns V]] IN OUT.bin "
                     "[--config preprocessor_config.json | --resize NW NH]\n");
        return 2;
    }
    kimi::image::MediaConfig cfg;
    if (!config_path.empty()) {
        const std::vector<uint8_t> text = read_file(config_path);
        const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
        if (j.is_discarded()) throw Error(config_path + ": not valid JSON");
        cfg = kimi::image::parse_media_config(j, config_path);
    }
    const std::vector<uint8_t> bytes = read_file(pos[0]);
    const DecodedImage img =
        raw_mode.empty() ? kimi::image::decode_image(bytes) : raw_image(bytes, raw_w, raw_h, raw_mode, pos[0], trns);
    if (resize_w >= 0) {
        const DecodedImage r = kimi::image::resize_image(img, resize_w, resize_h);
        write_file(pos[1], r.pixels.data(), r.pixels.size());
        std::printf("%s\n", nlohmann::json({{"width", r.width}, {"height", r.height}}).dump().c_str());
        return 0;
    }
    const kimi::image::PreparedImage out = kimi::image::prepare_image(img, cfg);
    write_file(pos[1], out.rgb.data(), out.rgb.size());
    write_file(pos[1] + ".patches", out.patches.data(), out.patches.size() * sizeof(float));
    const auto& g = out.geom;
    const nlohmann::json line = {{"mode", kimi::image::pixel_mode_name(img.mode)},
                                 {"width", g.width},
                                 {"height", g.height},
                                 {"new_width", g.new_width},
                                 {"new_height", g.new_height},
                                 {"pad_width", g.pad_width},
                                 {"pad_height", g.pad_height},
                                 {"grid_h", g.grid_h},
                                 {"grid_w", g.grid_w},
                                 {"n_tokens", g.n_tokens}};
    std::printf("%s\n", line.dump().c_str());
    return 0;
}

}   // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {   // kimi::Error, and bad_alloc for an absurd size
        std::fprintf(stderr, "image_prepare_dump: %s\n", e.what());
        return 1;
    }
}
