// image_decode_dump IN OUT.bin: decodes one image file with kimi::image::decode_image, writes the
// raw pixel bytes to OUT.bin (and for mode P the 256 RGBA palette entries to OUT.bin.palette) and
// prints one JSON line describing it; on a decoding error prints the message and exits 1. Used by
// decode_pillow_test.py to compare with Pillow.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/decode.h"

namespace {

bool write_file(const std::string& path, const std::vector<uint8_t>& data) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    return static_cast<bool>(out);
}

}   // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: image_decode_dump IN.img OUT.bin\n");
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "image_decode_dump: cannot open %s\n", argv[1]);
        return 2;
    }
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    kimi::image::DecodedImage img;
    try {
        img = kimi::image::decode_image(bytes);
    } catch (const kimi::Error& e) {
        std::fprintf(stderr, "image_decode_dump: %s\n", e.what());
        return 1;
    }
    const std::string out = argv[2];
    if (!write_file(out, img.pixels) ||
        (img.mode == kimi::image::PixelMode::kP && !write_file(out + ".palette", img.palette))) {
        std::fprintf(stderr, "image_decode_dump: cannot write %s\n", out.c_str());
        return 2;
    }
    std::printf(
        "{\"width\":%d,\"height\":%d,\"mode\":\"%s\",\"format\":\"%s\",\"has_transparency\":%s,\"transparent_value\":%"
        "d}\n",
        img.width, img.height, kimi::image::pixel_mode_name(img.mode), img.format.c_str(),
        img.has_transparency ? "true" : "false", img.transparent_value);
    return 0;
}
