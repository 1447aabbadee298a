// WebP → DecodedImage over libwebp, as Pillow 9.4 (built with webpdemux) decodes every WebP: the
// first frame composited on the canvas in straight RGBA, reported as RGB when the file has no
// alpha (Pillow's "RGBX") and RGBA when it has. An animated file goes through WebPAnimDecoder
// (its first frame, composited on the canvas); a still file is validated by the same demuxer and
// its one frame, which covers the canvas, is decoded by WebPDecode straight into the result
// (the pixels WebPAnimDecoder would composite, without its two canvas-sized buffers).
//
// probe_webp reads the RIFF chunks (the VP8X canvas, which must equal a still image's bitstream
// size; the first ANMF frame, which must lie in the canvas) and, for lossless bitstreams
// (VP8L, and ALPH chunks coded losslessly), follows the bitstream header far enough to know the
// memory libwebp will allocate: the transforms and the meta Huffman image, entropy-decoded
// without storing any pixel (scan_vp8l below mirrors libwebp 1.2.4's vp8l_dec.c).
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"
#include "image/decode_internal.h"

namespace kimi::image::detail {

namespace {

// --- VP8L bitstream scan -----------------------------------------------------------------------

constexpr int kNumLiteralCodes = 256, kNumLengthCodes = 24, kMaxCacheBits = 11;
constexpr int kMaxAlphabet = kNumLiteralCodes + kNumLengthCodes + (1 << kMaxCacheBits);   // 2328
constexpr int kAlphabetSize[5] = {kNumLiteralCodes + kNumLengthCodes, 256, 256, 256, 40};
constexpr uint8_t kCodeLengthCodeOrder[19] = {17, 18, 0, 1, 2, 3, 4, 5, 16, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr uint8_t kCodeToPlane[120] = {
    0x18, 0x07, 0x17, 0x19, 0x28, 0x06, 0x27, 0x29, 0x16, 0x1a, 0x26, 0x2a, 0x38, 0x05, 0x37, 0x39, 0x15, 0x1b,
    0x36, 0x3a, 0x25, 0x2b, 0x48, 0x04, 0x47, 0x49, 0x14, 0x1c, 0x35, 0x3b, 0x46, 0x4a, 0x24, 0x2c, 0x58, 0x45,
    0x4b, 0x34, 0x3c, 0x03, 0x57, 0x59, 0x13, 0x1d, 0x56, 0x5a, 0x23, 0x2d, 0x44, 0x4c, 0x55, 0x5b, 0x33, 0x3d,
    0x68, 0x02, 0x67, 0x69, 0x12, 0x1e, 0x66, 0x6a, 0x22, 0x2e, 0x54, 0x5c, 0x43, 0x4d, 0x65, 0x6b, 0x32, 0x3e,
    0x78, 0x01, 0x77, 0x79, 0x53, 0x5d, 0x11, 0x1f, 0x64, 0x6c, 0x42, 0x4e, 0x76, 0x7a, 0x21, 0x2f, 0x75, 0x7b,
    0x31, 0x3f, 0x63, 0x6d, 0x52, 0x5e, 0x00, 0x74, 0x7c, 0x41, 0x4f, 0x10, 0x20, 0x62, 0x6e, 0x30, 0x73, 0x7d,
    0x51, 0x5f, 0x40, 0x72, 0x7e, 0x61, 0x6f, 0x50, 0x71, 0x7f, 0x60, 0x70};
// libwebp's kTableSize: HuffmanCode entries (4 bytes) of one tree group's five tables, by colour cache bits.
constexpr int kFixedTableSize = 630 * 3 + 410;
constexpr int kTableSize[12] = {kFixedTableSize + 654,  kFixedTableSize + 656,  kFixedTableSize + 658,
                                kFixedTableSize + 662,  kFixedTableSize + 670,  kFixedTableSize + 686,
                                kFixedTableSize + 718,  kFixedTableSize + 782,  kFixedTableSize + 912,
                                kFixedTableSize + 1168, kFixedTableSize + 1680, kFixedTableSize + 2704};
constexpr int64_t kHTreeGroupBytes = 576;   // sizeof(HTreeGroup): 5 pointers, flags, a 64-entry packed table

int64_t sub_sample(int64_t size, int bits) { return (size + (int64_t{1} << bits) - 1) >> bits; }

// libwebp's VP8LBitReader as far as a successful decode sees it: bits LSB first; past the end of
// the data zeros, and "end of stream" once more bits were consumed than there are (at least 64).
class BitReader {
public:
    explicit BitReader(std::span<const uint8_t> d) : d_(d), limit_(std::max<uint64_t>(64, uint64_t{8} * d.size())) {}
    uint32_t read(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) v |= bit() << i;
        return v;
    }
    uint32_t bit() {
        const uint64_t byte = pos_ >> 3;
        const uint32_t b = byte < d_.size() ? (d_[byte] >> (pos_ & 7)) & 1u : 0u;
        ++pos_;
        return b;
    }
    bool eos() const { return pos_ > limit_; }

private:
    std::span<const uint8_t> d_;
    uint64_t pos_ = 0, limit_;
};

// A canonical prefix code as libwebp's BuildHuffmanTable accepts it: lengths ≤ 15, complete, or a
// single used symbol (then read with 0 bits).
struct PrefixCode {
    int count[16] = {};
    std::array<uint16_t, kMaxAlphabet> symbols{};
    int single = -1;

    bool build(const int* lengths, int n) {
        std::fill(std::begin(count), std::end(count), 0);
        single = -1;
        int used = 0, last = 0;
        for (int s = 0; s < n; ++s) {
            if (lengths[s] < 0 || lengths[s] > 15) return false;
            ++count[lengths[s]];
            if (lengths[s] > 0) ++used, last = s;
        }
        if (used == 0) return false;
        if (used == 1) {
            single = last;
            return true;
        }
        int64_t left = 1;
        for (int len = 1; len <= 15; ++len) {
            left = 2 * left - count[len];
            if (left < 0) return false;
        }
        if (left != 0) return false;
        int offset[16] = {};
        for (int len = 1; len < 15; ++len) offset[len + 1] = offset[len] + count[len];
        for (int s = 0; s < n; ++s)
            if (lengths[s] > 0) symbols[static_cast<size_t>(offset[lengths[s]]++)] = static_cast<uint16_t>(s);
        return true;
    }
    // The first bit read is the code's most significant one.
    int read(BitReader& br) const {
        if (single >= 0) return single;
        int code = 0, first = 0, index = 0;
        for (int len = 1; len <= 15; ++len) {
            code |= static_cast<int>(br.bit());
            const int c = count[len];
            if (code - first < c) return symbols[static_cast<size_t>(index + code - first)];
            index += c;
            first = (first + c) << 1;
            code <<= 1;
        }
        return -1;   // unreachable for a complete code
    }
};

class Vp8lScanner {
public:
    explicit Vp8lScanner(std::span<const uint8_t> data) : br_(data) {}

    bool scan(bool header, int64_t width, int64_t height, Vp8lScan& out) {
        if (header) {
            if (br_.read(8) != 0x2f) return false;
            br_.read(14), br_.read(14), br_.read(1);
            if (br_.read(3) != 0) return false;
        }
        // DecodeImageStream at level 0: the transforms, the colour cache, the Huffman codes.
        int64_t xsize = width;
        unsigned seen = 0;
        out.transform_bytes = 0;
        while (br_.read(1)) {
            const unsigned type = br_.read(2);
            if (seen & (1u << type)) return false;
            seen |= 1u << type;
            if (type == 0 || type == 1) {   // predictor / cross-colour: a sub-sampled image of parameters
                const int bits = static_cast<int>(br_.read(3)) + 2;
                const int64_t sx = sub_sample(xsize, bits), sy = sub_sample(height, bits);
                if (!skip_image(sx, sy)) return false;
                out.transform_bytes += 4 * sx * sy;
            } else if (type == 3) {   // colour indexing: a palette, then pixels packed by 2, 4 or 8
                const int colors = static_cast<int>(br_.read(8)) + 1;
                const int bits = colors > 16 ? 0 : colors > 4 ? 1 : colors > 2 ? 2 : 3;
                xsize = sub_sample(xsize, bits);
                if (!skip_image(colors, 1)) return false;
                out.transform_bytes += 4 * (int64_t{1} << (8 >> bits)) + 4 * colors;
            }
        }
        int cache_bits = 0;
        if (br_.read(1)) {
            cache_bits = static_cast<int>(br_.read(4));
            if (cache_bits < 1 || cache_bits > kMaxCacheBits) return false;
        }
        out.xsize = xsize;
        out.color_cache_bits = cache_bits;
        out.groups = out.groups_max = 1;
        out.huffman_image_bytes = 0;
        if (br_.read(1)) {   // meta Huffman codes: an image of group indices
            const int bits = static_cast<int>(br_.read(3)) + 2;
            const int64_t hx = sub_sample(xsize, bits), hy = sub_sample(height, bits);
            groups_seen_ = std::make_unique<std::bitset<65536>>();
            if (!skip_image(hx, hy)) return false;
            int64_t max_group = 0, distinct = 0;
            for (size_t g = 0; g < 65536; ++g) {
                if (!groups_seen_->test(g)) continue;
                max_group = static_cast<int64_t>(g);
                ++distinct;
            }
            out.huffman_image_bytes = 4 * hx * hy;
            out.groups_max = max_group + 1;
            // libwebp remaps the indices to the used ones when there are many.
            out.groups = out.groups_max > 1000 || out.groups_max > xsize * height ? distinct : out.groups_max;
        }
        // libwebp allocates its Huffman tables here, having read this far without running out of data.
        if (br_.eos()) return false;
        out.table_bytes = out.groups * kTableSize[cache_bits] * 4;
        out.parsed = true;
        return true;
    }

private:
    // One prefix code of the alphabet (ReadHuffmanCode / ReadHuffmanCodeLengths).
    bool read_code(int alphabet, PrefixCode& code) {
        std::fill(lengths_.begin(), lengths_.end(), 0);
        if (br_.read(1)) {   // simple: one or two symbols of length 1
            const int n = static_cast<int>(br_.read(1)) + 1;
            const int first_bits = br_.read(1) ? 8 : 1;
            lengths_[br_.read(first_bits)] = 1;
            if (n == 2) lengths_[br_.read(8)] = 1;
        } else {
            int cl_lengths[19] = {};
            const int num = static_cast<int>(br_.read(4)) + 4;
            if (num > 19) return false;
            for (int i = 0; i < num; ++i) cl_lengths[kCodeLengthCodeOrder[i]] = static_cast<int>(br_.read(3));
            if (!cl_code_.build(cl_lengths, 19)) return false;
            int max_symbol = alphabet;
            if (br_.read(1)) {
                const int nbits = 2 + 2 * static_cast<int>(br_.read(3));
                max_symbol = 2 + static_cast<int>(br_.read(nbits));
                if (max_symbol > alphabet) return false;
            }
            int symbol = 0, prev = 8;
            while (symbol < alphabet) {
                if (max_symbol-- == 0) break;
                const int len = cl_code_.read(br_);
                if (len < 16) {
                    lengths_[static_cast<size_t>(symbol++)] = len;
                    if (len != 0) prev = len;
                } else {
                    static constexpr int kExtra[3] = {2, 3, 7}, kOffset[3] = {3, 3, 11};
                    const int repeat = static_cast<int>(br_.read(kExtra[len - 16])) + kOffset[len - 16];
                    if (symbol + repeat > alphabet) return false;
                    for (int i = 0; i < repeat; ++i) lengths_[static_cast<size_t>(symbol++)] = len == 16 ? prev : 0;
                }
            }
        }
        if (br_.eos()) return false;
        return code.build(lengths_.data(), alphabet);
    }

    int copy_value(int symbol) {   // GetCopyDistance / GetCopyLength
        if (symbol < 4) return symbol + 1;
        const int extra = (symbol - 2) >> 1;
        const int offset = (2 + (symbol & 1)) << extra;
        return offset + static_cast<int>(br_.read(extra)) + 1;
    }

    // A sub-image (DecodeImageStream below level 0): colour cache, one group of five codes, then
    // xs × ys pixels as literals, backward references and cache hits. Only the group indices of
    // the meta Huffman image are kept: red << 8 | green of each literal (references and cache
    // hits repeat earlier values, or an unset cache entry: 0).
    bool skip_image(int64_t xs, int64_t ys) {
        int cache_bits = 0;
        if (br_.read(1)) {
            cache_bits = static_cast<int>(br_.read(4));
            if (cache_bits < 1 || cache_bits > kMaxCacheBits) return false;
        }
        const int cache_size = cache_bits ? 1 << cache_bits : 0;
        for (int j = 0; j < 5; ++j)
            if (!read_code(kAlphabetSize[j] + (j == 0 ? cache_size : 0), codes_[j])) return false;
        const int64_t total = xs * ys;
        int64_t pos = 0;
        while (pos < total) {
            if (br_.eos()) return false;
            const int code = codes_[0].read(br_);
            if (code < 0) return false;
            if (code < kNumLiteralCodes) {
                const int red = codes_[1].read(br_);
                codes_[2].read(br_), codes_[3].read(br_);
                if (groups_seen_) groups_seen_->set(static_cast<size_t>(red << 8 | code));
                ++pos;
            } else if (code < kNumLiteralCodes + kNumLengthCodes) {
                const int length = copy_value(code - kNumLiteralCodes);
                const int dist_code = copy_value(codes_[4].read(br_));
                int64_t dist = 0;
                if (dist_code > 120) {
                    dist = dist_code - 120;
                } else {
                    const int plane = kCodeToPlane[dist_code - 1];
                    dist = std::max<int64_t>(1, (plane >> 4) * xs + 8 - (plane & 0xf));
                }
                if (pos < dist || total - pos < length) return false;
                pos += length;
            } else if (code < kNumLiteralCodes + kNumLengthCodes + cache_size) {
                if (groups_seen_) groups_seen_->set(0);
                ++pos;
            } else {
                return false;
            }
        }
        return !br_.eos();
    }

    BitReader br_;
    std::array<int, kMaxAlphabet> lengths_{};
    PrefixCode cl_code_, codes_[5];
    std::unique_ptr<std::bitset<65536>> groups_seen_;   // set while scanning the meta Huffman image
};

// What libwebp allocates to decode a lossless bitstream of w × h (the main image, or an ALPH
// chunk's alpha plane) beyond the output: the ARGB pixels (at the packed width) and 17 rows of
// caches, the transform data, the meta Huffman image, the Huffman tables (a second segment as
// large as the first can follow), the index remapping, colour caches, code lengths; and for the
// sub-images read on the way, their own tables and caches.
int64_t vp8l_bytes(const Vp8lScan& s, int64_t w, int64_t h) {
    return 4 * (s.xsize * h + 17 * w) + s.transform_bytes + s.huffman_image_bytes + 2 * s.table_bytes +
        s.groups * kHTreeGroupBytes + 4 * s.groups_max + 2 * 4 * (int64_t{1} << s.color_cache_bits) + 4 * kMaxAlphabet +
        160 * 1024;
}

// What libwebp allocates to decode a lossy (VP8) bitstream of w × h: per macroblock column the
// intra modes, top samples, coefficient block and a 36-row cache of the filtered rows; the
// fancy upsampler's rows; the decoder struct.
int64_t vp8_bytes(int64_t w) { return 2048 * ((w + 15) / 16) + 4 * w + 64 * 1024; }

uint32_t le24(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16;
}
uint32_t le32(const uint8_t* p) { return le24(p) | static_cast<uint32_t>(p[3]) << 24; }

constexpr uint32_t kMaxChunkPayload = ~0u - 8 - 1;

struct Chunk {
    char tag[5] = {};
    std::span<const uint8_t> payload;   // its declared size, clipped to the data
    std::span<const uint8_t> padded;    // the size rounded up to even (as the demuxer hands it on), clipped
    size_t next = 0;                    // offset of the following chunk
};

// The chunk at `pos` of bytes[0, end): false when its header does not fit.
bool read_chunk(std::span<const uint8_t> bytes, size_t pos, size_t end, Chunk& c) {
    if (pos > end || end - pos < 8) return false;
    std::memcpy(c.tag, &bytes[pos], 4);
    const uint32_t size = le32(&bytes[pos + 4]);
    if (size > kMaxChunkPayload) throw Error("webp: invalid chunk size");
    const uint64_t padded = uint64_t{size} + (size & 1);
    const size_t avail = end - pos - 8;
    c.payload = bytes.subspan(pos + 8, std::min<uint64_t>(size, avail));
    c.padded = bytes.subspan(pos + 8, std::min<uint64_t>(padded, avail));
    c.next = pos + 8 + static_cast<size_t>(std::min<uint64_t>(padded, avail));
    if (padded > avail) c.next = end + 1;   // truncated
    return true;
}

bool is(const Chunk& c, const char* tag) { return std::memcmp(c.tag, tag, 4) == 0; }

// One frame's bitstreams: an optional ALPH chunk and a VP8 or VP8L chunk.
struct Frame {
    int64_t x = 0, y = 0, width = 0, height = 0;
    bool lossless = false, vp8l_alpha = false;
    std::span<const uint8_t> image;   // the VP8 / VP8L payload as libwebp's bit reader sees it
    bool has_alph = false;
    std::span<const uint8_t> alph;   // the ALPH payload (unpadded)
};

// The size in a VP8 / VP8L bitstream header (VP8GetInfo / VP8LGetInfo).
void read_bitstream_size(Frame& f, size_t chunk_size) {
    const std::span<const uint8_t> d = f.image;
    if (f.lossless) {
        if (d.size() < 5 || d[0] != 0x2f || (d[4] >> 5) != 0) throw Error("webp: invalid lossless bitstream header");
        const uint32_t bits = le32(&d[1]);
        f.width = (bits & 0x3fff) + 1;
        f.height = ((bits >> 14) & 0x3fff) + 1;
        f.vp8l_alpha = (bits >> 28) & 1;
    } else {
        if (d.size() < 10 || d[3] != 0x9d || d[4] != 0x01 || d[5] != 0x2a)
            throw Error("webp: invalid lossy bitstream header");
        const uint32_t tag = le24(&d[0]);
        if ((tag & 1) || ((tag >> 1) & 7) > 3 || !((tag >> 4) & 1) || (tag >> 5) >= chunk_size)
            throw Error("webp: invalid lossy bitstream header");
        f.width = (d[6] | d[7] << 8) & 0x3fff;
        f.height = (d[8] | d[9] << 8) & 0x3fff;
        if (f.width == 0 || f.height == 0) throw Error("webp: invalid lossy bitstream header");
    }
}

// Chunks from `pos` to `end`: [ALPH] then VP8 / VP8L (other chunks before the image are skipped,
// as WebPDecode's optional chunks; the last ALPH before it counts).
Frame read_frame(std::span<const uint8_t> bytes, size_t pos, size_t end) {
    Frame f;
    Chunk c;
    while (read_chunk(bytes, pos, end, c)) {
        if (is(c, "VP8 ") || is(c, "VP8L")) {
            f.lossless = is(c, "VP8L");
            if (f.lossless && f.has_alph) throw Error("webp: an ALPH chunk before a lossless bitstream");
            f.image = c.padded;
            read_bitstream_size(f, c.payload.size());
            if (c.next > end) throw Error("webp: truncated file");
            return f;
        }
        if (c.next > end) break;
        if (is(c, "ALPH")) f.has_alph = true, f.alph = c.payload;
        pos = c.next;
    }
    throw Error("webp: no image data (truncated file?)");
}

struct WebpLayout {
    int64_t canvas_w = 0, canvas_h = 0;
    bool animated = false, has_alpha = false;
    Frame frame;          // the first frame
    int64_t chunks = 0;   // top-level chunks (the demuxer keeps at most a record for each)
};

WebpLayout read_layout(std::span<const uint8_t> bytes) {
    const size_t n = bytes.size();
    if (n < 20) throw Error("webp: truncated file");
    const uint32_t riff_size = le32(&bytes[4]);
    if (riff_size < 12 || riff_size > kMaxChunkPayload) throw Error("webp: invalid RIFF header");
    if (uint64_t{riff_size} > n - 8) throw Error("webp: truncated file");
    const size_t end = static_cast<size_t>(riff_size) + 8;
    WebpLayout l;
    Chunk c;
    for (size_t pos = 12; read_chunk(bytes, pos, end, c) && c.next <= end; pos = c.next) ++l.chunks;
    Chunk first;
    read_chunk(bytes, 12, end, first);
    if (!is(first, "VP8X")) {   // a simple file: one VP8 / VP8L chunk
        l.frame = read_frame(bytes, 12, end);
        l.canvas_w = l.frame.width, l.canvas_h = l.frame.height;
        l.has_alpha = l.frame.lossless && l.frame.vp8l_alpha;
        return l;
    }
    if (first.payload.size() != 10) throw Error("webp: invalid VP8X chunk");
    const uint8_t flags = first.payload[0];
    l.canvas_w = int64_t{le24(&first.payload[4])} + 1;
    l.canvas_h = int64_t{le24(&first.payload[7])} + 1;
    l.animated = flags & 0x02;
    const bool alpha_flag = flags & 0x10;
    if (!l.animated) {
        l.frame = read_frame(bytes, first.next, end);
        if (l.frame.width != l.canvas_w || l.frame.height != l.canvas_h)
            throw Error("webp: the VP8X canvas " + std::to_string(l.canvas_w) + "x" + std::to_string(l.canvas_h) +
                        " does not match the bitstream's " + std::to_string(l.frame.width) + "x" +
                        std::to_string(l.frame.height));
        l.has_alpha = (l.frame.lossless ? l.frame.vp8l_alpha : alpha_flag) || l.frame.has_alph;
        return l;
    }
    // Animated: the first ANMF frame (16 bytes of offsets, size, duration and flags, then its
    // bitstreams), whose bitstream size (the demuxer's frame size) must fit the canvas there.
    l.has_alpha = alpha_flag;
    for (size_t pos = first.next; read_chunk(bytes, pos, end, c); pos = c.next) {
        if (c.next > end) throw Error("webp: truncated file");
        if (!is(c, "ANMF")) continue;
        if (c.payload.size() < 16) throw Error("webp: invalid ANMF chunk");
        const size_t payload_at = static_cast<size_t>(c.payload.data() - bytes.data());
        l.frame = read_frame(bytes, payload_at + 16, payload_at + c.payload.size());
        l.frame.x = 2 * int64_t{le24(&c.payload[0])};
        l.frame.y = 2 * int64_t{le24(&c.payload[3])};
        if (l.frame.x + l.frame.width > l.canvas_w || l.frame.y + l.frame.height > l.canvas_h)
            throw Error("webp: the first frame (" + std::to_string(l.frame.width) + "x" +
                        std::to_string(l.frame.height) + " at " + std::to_string(l.frame.x) + "," +
                        std::to_string(l.frame.y) + ") is outside the canvas");
        return l;
    }
    throw Error("webp: an animation without frames");
}

// Bytes to decode one frame of fw × fh (beyond the buffer it is decoded into).
int64_t frame_bytes(const Frame& f) {
    const int64_t w = f.width, h = f.height;
    if (f.lossless) {
        Vp8lScan s = scan_vp8l(f.image, true, w, h);
        if (!s.parsed) throw Error("webp: invalid lossless bitstream");
        return vp8l_bytes(s, w, h);
    }
    int64_t bytes = vp8_bytes(w);
    if (f.has_alph) {
        if (f.alph.size() < 2 || (f.alph[0] & 3) > 1 || ((f.alph[0] >> 2) & 3) > 3 || ((f.alph[0] >> 4) & 3) > 1 ||
            (f.alph[0] >> 6) != 0)
            throw Error("webp: invalid alpha chunk");
        bytes += 2 * w * h;   // the alpha plane (and the frame memory's unused copy of it)
        if ((f.alph[0] & 3) == 1) {
            Vp8lScan s = scan_vp8l(f.alph.subspan(1), false, w, h);
            if (!s.parsed) throw Error("webp: invalid lossless alpha bitstream");
            bytes += vp8l_bytes(s, w, h);
        }
    }
    return bytes;
}

struct AnimDecoderGuard {
    WebPAnimDecoder* dec = nullptr;
    ~AnimDecoderGuard() {
        if (dec) WebPAnimDecoderDelete(dec);
    }
};

struct DemuxGuard {
    WebPDemuxer* dmux = nullptr;
    WebPIterator iter{};
    bool has_iter = false;
    ~DemuxGuard() {
        if (has_iter) WebPDemuxReleaseIterator(&iter);
        if (dmux) WebPDemuxDelete(dmux);
    }
};

}   // namespace

Vp8lScan scan_vp8l(std::span<const uint8_t> data, bool header, int64_t width, int64_t height) {
    Vp8lScan out;
    auto scanner = std::make_unique<Vp8lScanner>(data);
    if (!scanner->scan(header, width, height, out)) out.parsed = false;
    return out;
}

ImageHeader probe_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    const WebpLayout l = read_layout(bytes);
    check_dimensions("webp", l.canvas_w, l.canvas_h, limits);
    ImageHeader h;
    h.width = static_cast<int32_t>(l.canvas_w);
    h.height = static_cast<int32_t>(l.canvas_h);
    h.mode = l.has_alpha ? PixelMode::kRGBA : PixelMode::kRGB;
    h.transparency = false;   // RGB or RGBA: the mode says it
    const int64_t p = l.canvas_w * l.canvas_h;
    const int64_t out = p * bytes_per_pixel(h.mode);
    // The demuxer: its struct, and a frame or chunk record (under 256 bytes) per chunk.
    const int64_t demux = 256 * (l.chunks + 1) + 8 * 1024;
    const int64_t frame = frame_bytes(l.frame);
    if (l.animated) {   // two RGBA canvases; the frame is decoded into one, then copied out
        h.decode_bytes = demux + 8 * p + std::max(frame, out) + kDecodeSlackBytes;
    } else {   // decoded straight into the result
        h.decode_bytes = demux + out + frame + kDecodeSlackBytes;
    }
    return h;
}

DecodedImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    WebPBitstreamFeatures features;
    const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
    if (status != VP8_STATUS_OK) throw Error("webp: invalid or truncated file (status " + std::to_string(status) + ")");
    // For an extended (VP8X) file these are the canvas dimensions.
    check_dimensions("webp", features.width, features.height, limits);

    DecodedImage img;
    img.width = features.width;
    img.height = features.height;
    img.mode = features.has_alpha ? PixelMode::kRGBA : PixelMode::kRGB;
    const WebPData data{bytes.data(), bytes.size()};
    if (!features.has_animation) {
        // The demuxer accepts what WebPAnimDecoderNew (Pillow's path) accepts; the one frame it
        // hands on is decoded as WebPAnimDecoder would, into the result instead of a canvas.
        DemuxGuard g;
        g.dmux = WebPDemux(&data);
        if (!g.dmux) throw Error("webp: could not decode the file (invalid or truncated)");
        if (WebPDemuxGetI(g.dmux, WEBP_FF_CANVAS_WIDTH) != static_cast<uint32_t>(img.width) ||
            WebPDemuxGetI(g.dmux, WEBP_FF_CANVAS_HEIGHT) != static_cast<uint32_t>(img.height))
            throw Error("webp: inconsistent canvas size");
        g.has_iter = WebPDemuxGetFrame(g.dmux, 1, &g.iter) != 0;
        if (!g.has_iter) throw Error("webp: could not decode the first frame");
        if (g.iter.x_offset != 0 || g.iter.y_offset != 0 || g.iter.width != img.width || g.iter.height != img.height)
            throw Error("webp: the frame does not cover the canvas");
        img.pixels.resize(pixel_bytes(img.width, img.height, img.mode));
        WebPDecoderConfig config;
        if (!WebPInitDecoderConfig(&config)) throw Error("webp: library version mismatch");
        const int bpp = bytes_per_pixel(img.mode);
        config.output.colorspace = img.mode == PixelMode::kRGBA ? MODE_RGBA : MODE_RGB;
        config.output.is_external_memory = 1;
        config.output.u.RGBA.rgba = img.pixels.data();
        config.output.u.RGBA.stride = img.width * bpp;
        config.output.u.RGBA.size = img.pixels.size();
        config.options.use_threads = 0;
        const VP8StatusCode s = WebPDecode(g.iter.fragment.bytes, g.iter.fragment.size, &config);
        WebPFreeDecBuffer(&config.output);
        if (s != VP8_STATUS_OK)
            throw Error("webp: could not decode the first frame (status " + std::to_string(s) + ")");
        return img;
    }

    WebPAnimDecoderOptions options;
    if (!WebPAnimDecoderOptionsInit(&options)) throw Error("webp: library version mismatch");
    options.color_mode = MODE_RGBA;
    options.use_threads = 0;
    AnimDecoderGuard guard;
    guard.dec = WebPAnimDecoderNew(&data, &options);
    if (!guard.dec) throw Error("webp: could not decode the file (invalid or truncated)");
    WebPAnimInfo info;
    if (!WebPAnimDecoderGetInfo(guard.dec, &info)) throw Error("webp: could not read the image info");
    check_dimensions("webp", info.canvas_width, info.canvas_height, limits);
    if (static_cast<int64_t>(info.canvas_width) != features.width ||
        static_cast<int64_t>(info.canvas_height) != features.height)
        throw Error("webp: inconsistent canvas size");
    uint8_t* canvas = nullptr;
    int timestamp = 0;
    if (!WebPAnimDecoderGetNext(guard.dec, &canvas, &timestamp) || !canvas)
        throw Error("webp: could not decode the first frame");

    const size_t n = static_cast<size_t>(img.width) * static_cast<size_t>(img.height);
    if (img.mode == PixelMode::kRGBA) {
        img.pixels.assign(canvas, canvas + 4 * n);
    } else {
        img.pixels.resize(3 * n);
        for (size_t i = 0; i < n; ++i) {
            img.pixels[3 * i] = canvas[4 * i];
            img.pixels[3 * i + 1] = canvas[4 * i + 1];
            img.pixels[3 * i + 2] = canvas[4 * i + 2];
        }
    }
    return img;
}

}   // namespace kimi::image::detail
