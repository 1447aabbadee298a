// JPEG → DecodedImage over libjpeg(-turbo) with Pillow 9.4's settings (ISLOW DCT, fancy
// upsampling): 1 component → L, 3 → RGB, 4 → CMYK un-inverted as Pillow's "CMYK;I" (Pillow assumes
// Adobe polarity for every CMYK/YCCK JPEG); then the EXIF orientation of the first APP1 "Exif"
// segment, as PIL.ImageOps.exif_transpose. Like Pillow, any truncation (even a missing EOI) is an
// error. libjpeg reports errors by longjmp: the setjmp functions below hold only plain C data.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
// jerror.h after jpeglib.h.
#include <jerror.h>

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
    jpeg_save_markers(&st->cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&st->cinfo, TRUE);
    return true;
}

// Phase 2: decompress every scanline into `out` (rows of `stride` bytes).
bool read_pixels(JpegState* st, J_COLOR_SPACE space, uint8_t* out, size_t stride) {
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
    while (cinfo->output_scanline < cinfo->output_height) {
        JSAMPROW row = out + static_cast<size_t>(cinfo->output_scanline) * stride;
        if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
            std::snprintf(st->message, sizeof st->message, "no progress reading scanlines");
            return false;
        }
    }
    jpeg_finish_decompress(cinfo);
    return true;
}

}   // namespace

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
    img.width = static_cast<int32_t>(st.cinfo.image_width);
    img.height = static_cast<int32_t>(st.cinfo.image_height);

    // Pillow takes info["exif"] from the first APP1 segment that starts with "Exif\0".
    int orientation = 1;
    for (jpeg_saved_marker_ptr m = st.cinfo.marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 5 && std::memcmp(m->data, "Exif\0", 5) == 0) {
            orientation = exif_orientation(std::span<const uint8_t>(m->data, m->data_length));
            break;
        }
    }

    img.pixels.resize(pixel_bytes(img.width, img.height, img.mode));
    const size_t stride = static_cast<size_t>(img.width) * static_cast<size_t>(bytes_per_pixel(img.mode));
    if (!read_pixels(&st, space, img.pixels.data(), stride)) throw Error(std::string("jpeg: ") + st.message);
    if (img.mode == PixelMode::kCMYK)
        for (uint8_t& v : img.pixels) v = static_cast<uint8_t>(255 - v);
    apply_orientation(img, orientation);
    return img;
}

}   // namespace kimi::image::detail
