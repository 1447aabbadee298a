// JPEG → DecodedImage over libjpeg(-turbo) with Pillow 9.4's settings (ISLOW DCT, fancy
// upsampling): 1 component → L, 3 → RGB, 4 → CMYK un-inverted as Pillow's "CMYK;I" (Pillow assumes
// Adobe polarity for every CMYK/YCCK JPEG); then the EXIF orientation of the first APP1 "Exif"
// segment, as PIL.ImageOps.exif_transpose. Like Pillow, any truncation (even a missing EOI) is an
// error. libjpeg reports errors by longjmp: the setjmp functions below hold only plain C data.
// Memory: APP1 segments are looked at in place (nothing saved), oriented images are written row
// by row into the result (no second image buffer), and libjpeg's own allocations are capped by
// max_memory_to_use at what jpeg_library_bytes promises (its whole-image coefficient buffers of
// progressive and multi-scan files included). probe_jpeg reads the same markers up to the first
// SOS without libjpeg.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
// jerror.h after jpeglib.h.
#include <jerror.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/decode_internal.h"

namespace kimi::image::detail {

namespace {

constexpr int kMaxScans = 1000;   // a progressive JPEG with more scans is a decoding-time bomb

struct JpegState {
    jpeg_decompress_struct cinfo;
    jpeg_error_mgr err;
    jpeg_source_mgr src;
    jpeg_progress_mgr progress;
    std::jmp_buf jump;
    bool created = false;
    char message[JMSG_LENGTH_MAX] = {};
    const uint8_t* data = nullptr;
    size_t size = 0;
    // The first APP1 "Exif\0" payload before the first SOS (an offset into data), if any.
    bool header_done = false, has_exif = false;
    size_t exif_offset = 0, exif_length = 0;
};

struct JpegGuard {
    JpegState* st;
    ~JpegGuard() {
        if (st->created) jpeg_destroy_decompress(&st->cinfo);
    }
};

JpegState* state_of(j_common_ptr cinfo) { return static_cast<JpegState*>(cinfo->client_data); }

void error_exit(j_common_ptr cinfo) {
    JpegState* st = state_of(cinfo);
    cinfo->err->format_message(cinfo, st->message);
    std::longjmp(st->jump, 1);
}

void output_message(j_common_ptr) {}   // warnings (corrupt-data recoveries) are silent, as in Pillow

// The source: the whole file is in memory; needing more than that means it was truncated.
void init_source(j_decompress_ptr) {}
boolean fill_input_buffer(j_decompress_ptr cinfo) {
    ERREXIT(cinfo, JERR_INPUT_EOF);
    return FALSE;
}
void skip_input_data(j_decompress_ptr cinfo, long num_bytes) {
    if (num_bytes <= 0) return;
    jpeg_source_mgr* src = cinfo->src;
    if (static_cast<unsigned long>(num_bytes) > src->bytes_in_buffer) ERREXIT(cinfo, JERR_INPUT_EOF);
    src->next_input_byte += num_bytes;
    src->bytes_in_buffer -= static_cast<size_t>(num_bytes);
}
void term_source(j_decompress_ptr) {}

// APP1: noted in place when it is the first "Exif\0" segment of the header, then skipped (as
// skip_variable does: a length below 2 has no payload); libjpeg saves nothing.
boolean read_app1(j_decompress_ptr cinfo) {
    jpeg_source_mgr* src = cinfo->src;
    JpegState* st = state_of(reinterpret_cast<j_common_ptr>(cinfo));
    if (src->bytes_in_buffer < 2) ERREXIT(cinfo, JERR_INPUT_EOF);
    const size_t length = static_cast<size_t>(src->next_input_byte[0]) << 8 | src->next_input_byte[1];
    src->next_input_byte += 2;
    src->bytes_in_buffer -= 2;
    const size_t payload = length >= 2 ? length - 2 : 0;
    if (payload > src->bytes_in_buffer) ERREXIT(cinfo, JERR_INPUT_EOF);
    if (!st->header_done && !st->has_exif && payload >= 5 && std::memcmp(src->next_input_byte, "Exif\0", 5) == 0) {
        st->has_exif = true;
        st->exif_offset = static_cast<size_t>(src->next_input_byte - st->data);
        st->exif_length = payload;
    }
    src->next_input_byte += payload;
    src->bytes_in_buffer -= payload;
    return TRUE;
}

void progress_monitor(j_common_ptr cinfo) {
    if (cinfo->is_decompressor && reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxScans) {
        JpegState* st = state_of(cinfo);
        std::snprintf(st->message, sizeof st->message, "too many scans (more than %d)", kMaxScans);
        std::longjmp(st->jump, 1);
    }
}

// Phase 1: headers (and the APP1 markers, saved for the EXIF orientation).
bool read_header(JpegState* st) {
    if (setjmp(st->jump)) return false;
    st->cinfo.err = jpeg_std_error(&st->err);
    st->err.error_exit = error_exit;
    st->err.output_message = output_message;
    st->cinfo.client_data = st;
    jpeg_create_decompress(&st->cinfo);   // keeps err and client_data
    st->created = true;
    st->src.next_input_byte = st->data;
    st->src.bytes_in_buffer = st->size;
    st->src.init_source = init_source;
    st->src.fill_input_buffer = fill_input_buffer;
    st->src.skip_input_data = skip_input_data;
    st->src.resync_to_restart = jpeg_resync_to_restart;
    st->src.term_source = term_source;
    st->cinfo.src = &st->src;
    st->progress.progress_monitor = progress_monitor;
    st->cinfo.progress = &st->progress;
    jpeg_set_marker_processor(&st->cinfo, JPEG_APP0 + 1, read_app1);
    jpeg_read_header(&st->cinfo, TRUE);
    st->header_done = true;
    return true;
}

// Phase 2: decompress every scanline into `out`, the image after `orientation` (rows of `stride`
// bytes go straight in when it is 1, else through `row` to their oriented places).
bool read_pixels(JpegState* st, J_COLOR_SPACE space, uint8_t* out, size_t stride, int orientation, uint8_t* row) {
    if (setjmp(st->jump)) return false;
    j_decompress_ptr cinfo = &st->cinfo;
    cinfo->out_color_space = space;
    cinfo->dct_method = JDCT_ISLOW;
    cinfo->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(cinfo);
    if (cinfo->output_width != cinfo->image_width || cinfo->output_height != cinfo->image_height ||
        static_cast<size_t>(cinfo->output_components) * cinfo->output_width != stride) {
        std::snprintf(st->message, sizeof st->message, "unexpected output layout");
        return false;
    }
    const size_t w = cinfo->output_width, h = cinfo->output_height;
    const size_t bpp = static_cast<size_t>(cinfo->output_components);
    while (cinfo->output_scanline < cinfo->output_height) {
        const size_t y = cinfo->output_scanline;
        JSAMPROW dst = orientation == 1 ? out + y * stride : row;
        if (jpeg_read_scanlines(cinfo, &dst, 1) != 1) {
            std::snprintf(st->message, sizeof st->message, "no progress reading scanlines");
            return false;
        }
        if (orientation != 1) place_oriented_row(row, y, w, h, bpp, orientation, out);
    }
    jpeg_finish_decompress(cinfo);
    return true;
}

// Rounds up to a multiple of m.
int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

uint32_t be16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) << 8 | p[1]; }

Error truncated() { return Error("jpeg: Premature end of JPEG file (header)"); }

// libjpeg's next_marker: the code of the next marker from `pos` (moved past it), skipping any
// garbage before its 0xff and the fill bytes after.
int next_marker(const uint8_t* d, size_t n, size_t& pos) {
    int c = 0;
    for (;;) {
        while (pos < n && d[pos] != 0xff) ++pos;
        if (pos >= n) throw truncated();
        do {
            if (++pos >= n) throw truncated();
            c = d[pos];
        } while (c == 0xff);
        ++pos;
        if (c != 0) return c;
    }
}

// The markers jdmarker.c reads (with parameters); any other is refused as libjpeg refuses it.
void check_marker_supported(int c) {
    const bool known = c == 0xc0 || c == 0xc1 || c == 0xc2 || c == 0xc9 || c == 0xca || c == 0xda || c == 0xcc ||
        c == 0xc4 || c == 0xdb || c == 0xdd || (c >= 0xe0 && c <= 0xef) || c == 0xfe || c == 0xdc;
    if (!known) {
        if (c == 0xc3 || c == 0xc5 || c == 0xc6 || c == 0xc7 || c == 0xc8 || c == 0xcb || c == 0xcd || c == 0xce ||
            c == 0xcf)
            throw Error("jpeg: Unsupported JPEG process: SOF type 0x" + std::to_string(c));
        throw Error("jpeg: Unsupported marker type 0x" + std::to_string(c));
    }
}

}   // namespace

int64_t jpeg_library_bytes(const JpegFrame& f) {
    int64_t max_h = 1, max_v = 1;
    for (int c = 0; c < f.components; ++c)
        max_h = std::max<int64_t>(max_h, f.h_samp[c]), max_v = std::max<int64_t>(max_v, f.v_samp[c]);
    int64_t bytes = 256 * 1024;   // structs, small pools (16 KB first), Huffman / quantisation / colour tables
    for (int c = 0; c < f.components; ++c) {
        const int64_t h = f.h_samp[c], v = f.v_samp[c];
        const int64_t wib = (f.width * h + max_h * 8 - 1) / (max_h * 8);   // width in DCT blocks
        const int64_t hib = (f.height * v + max_v * 8 - 1) / (max_v * 8);
        // The main buffer: (8 + 2 context) row groups of v block rows, and its row pointers.
        bytes += wib * 8 * v * 10 + v * 10 * 8 * 4;
        // The upsampler's colour buffer: max_v rows of the output width.
        bytes += round_up(f.width, max_h) * max_v + max_v * 8;
        // Progressive or multi-scan: every coefficient of the component (64 × 2 bytes per block),
        // padded to whole MCUs.
        if (f.multi_scan) bytes += round_up(wib, h) * round_up(hib, v) * 128 + round_up(hib, v) * 8;
    }
    return bytes;
}

namespace {

// What probe_jpeg reports of a frame: the size after the EXIF orientation, and the bytes decoding
// it takes (the pixels, a row to orient, libjpeg's buffers).
ImageHeader jpeg_image_header(const JpegFrame& f, int orientation) {
    ImageHeader h;
    const bool swap = orientation >= 5 && orientation <= 8;
    h.width = static_cast<int32_t>(swap ? f.height : f.width);
    h.height = static_cast<int32_t>(swap ? f.width : f.height);
    h.orientation = orientation;
    h.transparency = false;
    h.mode = f.components == 1 ? PixelMode::kL : f.components == 3 ? PixelMode::kRGB : PixelMode::kCMYK;
    const int64_t out = f.width * f.height * f.components;
    h.decode_bytes = out + (orientation != 1 ? f.width * f.components : 0) + jpeg_library_bytes(f) + kDecodeSlackBytes;
    return h;
}

}   // namespace

ImageHeader probe_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    // libjpeg's read_markers up to the first SOS: SOI first; between markers any garbage and fill
    // bytes are skipped (next_marker); the parameters of each marker are read as jdmarker.c does.
    const uint8_t* d = bytes.data();
    const size_t n = bytes.size();
    if (n < 2 || d[0] != 0xff || d[1] != 0xd8) throw Error("jpeg: Not a JPEG file");
    size_t pos = 2;
    JpegFrame f;
    bool saw_sof = false, has_exif = false;
    int orientation = 1, precision = 8;
    for (;;) {
        const int c = next_marker(d, n, pos);
        if (c == 0xd8) throw Error("jpeg: Invalid JPEG file structure: two SOI markers");
        if (c == 0xd9) throw Error("jpeg: Invalid JPEG file structure: missing SOS marker (no image)");
        if ((c >= 0xd0 && c <= 0xd7) || c == 0x01) continue;   // RSTn, TEM: no parameters
        check_marker_supported(c);
        if (n - pos < 2) throw truncated();
        const size_t length = be16(d + pos);
        if (c == 0xc0 || c == 0xc1 || c == 0xc2 || c == 0xc9 || c == 0xca) {   // SOFn
            if (n - pos < 8) throw truncated();
            if (saw_sof) throw Error("jpeg: Invalid JPEG file structure: two SOF markers");
            precision = d[pos + 2];
            f.height = be16(d + pos + 3);
            f.width = be16(d + pos + 5);
            f.components = d[pos + 7];
            if (f.width <= 0 || f.height <= 0 || f.components <= 0)
                throw Error("jpeg: Empty JPEG image (DNL not supported)");
            if (length != 8 + 3 * static_cast<size_t>(f.components)) throw Error("jpeg: Bogus marker length");
            if (n - pos < length) throw truncated();
            if (f.components != 1 && f.components != 3 && f.components != 4)
                throw Error("jpeg: cannot handle " + std::to_string(f.components) + "-layer images");
            for (int i = 0; i < f.components; ++i) {
                const uint8_t samp = d[pos + 8 + 3 * static_cast<size_t>(i) + 1];
                f.h_samp[i] = samp >> 4, f.v_samp[i] = samp & 15;
            }
            f.multi_scan = c == 0xc2 || c == 0xca;
            saw_sof = true;
            pos += length;
            continue;
        }
        if (c == 0xda) {   // SOS: the header ends here
            if (!saw_sof) throw Error("jpeg: Invalid JPEG file structure: SOS before SOF");
            if (n - pos < 3) throw truncated();
            const int in_scan = d[pos + 2];
            if (length != 6 + 2 * static_cast<size_t>(in_scan) || in_scan < 1 || in_scan > 4)
                throw Error("jpeg: Bogus marker length");
            if (in_scan < f.components) f.multi_scan = true;
            break;
        }
        // Everything else has a length word and is skipped (a length below 2: no payload); APP1
        // "Exif\0" as decode_jpeg's read_app1 notes it.
        const size_t payload = length >= 2 ? length - 2 : 0;
        if (n - pos - 2 < payload) throw truncated();
        if (c == 0xe1 && !has_exif && payload >= 5 && std::memcmp(d + pos + 2, "Exif\0", 5) == 0) {
            has_exif = true;
            orientation = exif_orientation(bytes.subspan(pos + 2, payload));
        }
        pos += 2 + payload;
    }
    if (precision != 8) throw Error("jpeg: Unsupported JPEG data precision " + std::to_string(precision));
    for (int i = 0; i < f.components; ++i)
        if (f.h_samp[i] < 1 || f.h_samp[i] > 4 || f.v_samp[i] < 1 || f.v_samp[i] > 4)
            throw Error("jpeg: Bogus sampling factors");
    check_dimensions("jpeg", f.width, f.height, limits);

    return jpeg_image_header(f, orientation);
}

DecodedImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    JpegState st;
    st.data = bytes.data();
    st.size = bytes.size();
    JpegGuard guard{&st};
    if (!read_header(&st)) throw Error(std::string("jpeg: ") + st.message);

    DecodedImage img;
    J_COLOR_SPACE space = JCS_RGB;
    switch (st.cinfo.num_components) {
        case 1: img.mode = PixelMode::kL, space = JCS_GRAYSCALE; break;
        case 3: img.mode = PixelMode::kRGB, space = JCS_RGB; break;
        case 4: img.mode = PixelMode::kCMYK, space = JCS_CMYK; break;
        default: throw Error("jpeg: cannot handle " + std::to_string(st.cinfo.num_components) + "-layer images");
    }
    check_dimensions("jpeg", st.cinfo.image_width, st.cinfo.image_height, limits);

    // libjpeg may allocate what jpeg_library_bytes allows and no more: beyond it, its whole-image
    // buffers would need a backing store, which this build refuses (an Error, not a bigger heap).
    JpegFrame frame;
    frame.width = st.cinfo.image_width;
    frame.height = st.cinfo.image_height;
    frame.components = st.cinfo.num_components;
    for (int c = 0; c < frame.components; ++c) {
        frame.h_samp[c] = st.cinfo.comp_info[c].h_samp_factor;
        frame.v_samp[c] = st.cinfo.comp_info[c].v_samp_factor;
    }
    frame.multi_scan = st.cinfo.progressive_mode || st.cinfo.comps_in_scan < st.cinfo.num_components;
    st.cinfo.mem->max_memory_to_use = static_cast<long>(jpeg_library_bytes(frame));

    // Pillow takes info["exif"] from the first APP1 segment that starts with "Exif\0".
    const int orientation = st.has_exif ? exif_orientation(bytes.subspan(st.exif_offset, st.exif_length)) : 1;
    const bool swap = orientation >= 5 && orientation <= 8;
    const int32_t w = static_cast<int32_t>(st.cinfo.image_width), h = static_cast<int32_t>(st.cinfo.image_height);
    img.width = swap ? h : w;
    img.height = swap ? w : h;

    img.pixels.resize(pixel_bytes(img.width, img.height, img.mode));
    const size_t stride = static_cast<size_t>(w) * static_cast<size_t>(bytes_per_pixel(img.mode));
    std::vector<uint8_t> row(orientation != 1 ? stride : 0);
    if (!read_pixels(&st, space, img.pixels.data(), stride, orientation, row.data()))
        throw Error(std::string("jpeg: ") + st.message);
    if (img.mode == PixelMode::kCMYK)
        for (uint8_t& v : img.pixels) v = static_cast<uint8_t>(255 - v);
    return img;
}

}   // namespace kimi::image::detail
