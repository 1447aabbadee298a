// Private to the decoders (src/image/decode*.cpp, exif.cpp, probe.cpp): the per-format entry
// points that decode_image and probe_image dispatch to, the shared limit check and the EXIF
// orientation helpers.
#pragma once
#include <cstdint>
#include <span>

#include "image/decode.h"
#include "image/decoded_image.h"
#include "image/probe.h"

namespace kimi::image::detail {

// Throws kimi::Error("<format>: ...") unless 0 < width, height <= max_side and
// width × height <= max_pixels. Call it before allocating anything proportional to the image.
void check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits);

// width × height × bytes_per_pixel(mode) as a size_t, for dimensions that passed check_dimensions.
size_t pixel_bytes(int32_t width, int32_t height, PixelMode mode);

// Heap bytes every decode may use beyond the formulas of the probes: the C libraries' fixed
// structs and tables, error messages, exceptions.
constexpr int64_t kDecodeSlackBytes = 256 * 1024;

// decode_image without the probe and without the size check against it (decode_image is
// probe_image, then this, then the check). For the tests and the fuzz target.
DecodedImage decode_unprobed(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// The per-format probes behind probe_image (format, size, mode and decode_bytes filled in).
ImageHeader probe_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);
ImageHeader probe_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
ImageHeader probe_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);
ImageHeader probe_gif(std::span<const uint8_t> bytes, const DecodeLimits& limits);
ImageHeader probe_bmp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// The heap libjpeg allocates for one decompression (everything but the output rows), from the
// frame header: sampling factors of each component, and whether the whole-image coefficient
// buffers are needed (progressive, or a first scan without every component).
struct JpegFrame {
    int64_t width = 0, height = 0;
    int components = 0;
    int h_samp[4] = {1, 1, 1, 1}, v_samp[4] = {1, 1, 1, 1};
    bool multi_scan = false;
};
int64_t jpeg_library_bytes(const JpegFrame& f);

// What the lossless (VP8L) bitstream header says about the memory libwebp will allocate for it:
// read by walking the transforms and the entropy-coded sub-images (transform data, meta Huffman
// image) without storing any pixel. `parsed` is false when the stream could not be followed to
// the point where libwebp allocates its Huffman tables (then callers assume the worst case).
struct Vp8lScan {
    bool parsed = false;
    int64_t xsize = 0;             // width after the colour-indexing transform's packing
    int64_t transform_bytes = 0;   // predictor / cross-colour / palette data libwebp keeps
    int64_t huffman_image_bytes = 0;
    int64_t groups = 0;       // Huffman tree groups libwebp allocates tables for
    int64_t groups_max = 0;   // largest group index + 1 (the size of libwebp's remapping)
    int color_cache_bits = 0;
    int64_t table_bytes = 0;   // libwebp's first allocation of Huffman tables: groups × tables of a group
};
// `data`: the bitstream from its first bit; `header`: whether it starts with the 5-byte VP8L
// header (false for an ALPH chunk's lossless payload). width/height: the image it codes.
Vp8lScan scan_vp8l(std::span<const uint8_t> data, bool header, int64_t width, int64_t height);

DecodedImage decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_gif(std::span<const uint8_t> bytes, const DecodeLimits& limits);
DecodedImage decode_bmp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// The EXIF orientation (1..8) in a JPEG APP1 payload ("Exif\0\0" + TIFF), as Pillow's
// getexif()[0x0112] would read it from IFD0; 1 when the payload has none or is malformed.
int exif_orientation(std::span<const uint8_t> app1_payload);

// Applies orientation 2..8 the way PIL.ImageOps.exif_transpose does (1 and others: no change).
void apply_orientation(DecodedImage& image, int orientation);

// The same transform one source row at a time: row `y` (of `bpp`-byte pixels) of a w × h image
// goes to its places in `out`, the oriented image (h × w for orientations 5..8), so a decoder
// can write rows straight into the result without a second image-sized buffer.
void place_oriented_row(const uint8_t* row, size_t y, size_t w, size_t h, size_t bpp, int orientation, uint8_t* out);

}   // namespace kimi::image::detail
