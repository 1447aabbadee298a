// libFuzzer target: the image header probe (probe_image) and the memory bound it promises.
// Input: the encoded image bytes.
// Checked beyond "no crash", with the heap measured by ASan's malloc/free hooks (C libraries'
// mallocs included): probe_image itself allocates little (nothing proportional to the image);
// when it accepts, its size is within the limits, decoding (detail::decode_unprobed, what
// decode_image runs after the probe) peaks at no more than header.decode_bytes and, when it
// succeeds, gives exactly the header's size and mode; prepare_image of the result peaks at no
// more than prepare_bytes(header, config) beyond its input. A lossless WebP bitstream the probe
// could not follow must not be one libwebp decodes, and for one it decodes the Huffman table block
// the scan predicted is the one libwebp allocated; libjpeg never runs into the memory cap the
// bound sets it. Clean errors: kimi::Error.
// KIMI_FUZZ_VERBOSE=1 also prints each accepted input's peaks next to its bounds.
#include <sanitizer/allocator_interface.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "image/decode.h"
#include "image/decode_internal.h"
#include "image/preprocess.h"
#include "image/probe.h"

namespace {

// Live heap bytes and their peak since the last reset (the process is single-threaded here); while
// g_recording, the size of every allocation.
int64_t g_live = 0, g_peak = 0;
constexpr int kMaxRecorded = 1 << 16;
bool g_recording = false;
int g_num_recorded = 0;
size_t g_recorded[kMaxRecorded];

void on_malloc(const volatile void*, size_t size) {
    if (g_recording && g_num_recorded < kMaxRecorded) g_recorded[g_num_recorded++] = size;
    g_live += static_cast<int64_t>(size);
    if (g_live > g_peak) g_peak = g_live;
}

void on_free(const volatile void* ptr) {
    if (ptr) g_live -= static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<const void*>(ptr)));
}

// The peak of `fn` above the heap in use when it starts.
template <typename Fn>
int64_t measure(Fn&& fn) {
    const int64_t start = g_live;
    g_peak = g_live;
    fn();
    return g_peak - start;
}

std::string detail_of(const kimi::image::ImageHeader& h, const char* what, int64_t peak, int64_t bound) {
    return h.format + " " + std::to_string(h.width) + "x" + std::to_string(h.height) + " " +
        kimi::image::pixel_mode_name(h.mode) + ": " + what + " peak " + std::to_string(peak) + " > bound " +
        std::to_string(bound);
}

uint32_t le32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
        static_cast<uint32_t>(p[3]) << 24;
}

bool verbose() {
    static const bool on = std::getenv("KIMI_FUZZ_VERBOSE") != nullptr;
    return on;
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool hooks = [] { return __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0; }();
    if (!hooks) kimi::fuzz::fail("could not install the malloc hooks");
    using namespace kimi::image;
    const std::span<const uint8_t> bytes(data, size);
    DecodeLimits limits;
    limits.max_pixels = 1 << 22;   // keep each run short; the limits themselves are checked here too
    limits.max_side = 8192;

    ImageHeader h;
    std::string refusal;
    const int64_t probe_peak = measure([&] {
        try {
            h = probe_image(bytes, limits);
        } catch (const kimi::Error& e) {
            refusal = e.what();
        }
    });
    fuzz_assert(probe_peak <= 256 * 1024, "probe peak " + std::to_string(probe_peak));
    if (!refusal.empty()) {
        kimi::fuzz::note_refusal("probe");
        if (refusal.find("invalid lossless") != std::string::npos) {   // the VP8L scan must follow libwebp
            bool decoded = false;
            try {
                detail::decode_unprobed(bytes, limits);
                decoded = true;
            } catch (const kimi::Error&) {}
            fuzz_assert(!decoded, refusal);
        }
        return 0;
    }
    fuzz_assert(h.width > 0 && h.height > 0 && h.width <= limits.max_side && h.height <= limits.max_side);
    fuzz_assert(int64_t{h.width} * h.height <= limits.max_pixels);
    fuzz_assert(h.decode_bytes >= int64_t{h.width} * h.height);

    DecodedImage img;
    bool decoded = false;
    std::string error;
    g_num_recorded = 0;
    g_recording = true;
    const int64_t decode_peak = measure([&] {
        try {
            img = detail::decode_unprobed(bytes, limits);
            decoded = true;
        } catch (const kimi::Error& e) {
            error = e.what();
        }
    });
    g_recording = false;
    // libjpeg's cap (max_memory_to_use = the bound) must never be what stops a decode.
    fuzz_assert(error.find("Backing store") == std::string::npos, error);
    fuzz_assert(decode_peak <= h.decode_bytes, detail_of(h, "decode", decode_peak, h.decode_bytes));
    if (!decoded) {
        kimi::fuzz::note_refusal("decode");
        return 0;
    }
    fuzz_assert(img.width == h.width && img.height == h.height && img.mode == h.mode,
                h.format + ": header " + std::to_string(h.width) + "x" + std::to_string(h.height) + " " +
                    pixel_mode_name(h.mode) + ", decoded " + std::to_string(img.width) + "x" +
                    std::to_string(img.height) + " " + pixel_mode_name(img.mode));

    // A simple lossless WebP: the probe's scan predicted libwebp's Huffman table block exactly.
    if (h.format == "webp" && size >= 25 && std::memcmp(data + 12, "VP8L", 4) == 0) {
        const uint32_t chunk = le32(data + 16), riff_end = le32(data + 4) + 8;
        const size_t avail = std::min<size_t>(riff_end, size) - 20;
        const detail::Vp8lScan scan = detail::scan_vp8l(
            bytes.subspan(20, std::min<size_t>(uint64_t{chunk} + (chunk & 1), avail)), true, h.width, h.height);
        fuzz_assert(scan.parsed);
        bool found = false;
        for (int i = 0; i < g_num_recorded && !found; ++i)
            found = static_cast<int64_t>(g_recorded[i]) == scan.table_bytes;
        fuzz_assert(found || g_num_recorded == kMaxRecorded,
                    "no Huffman table block of " + std::to_string(scan.table_bytes));
    }

    MediaConfig mc;
    mc.in_patch_limit = 256;   // small: the resize and the cut are what is measured, not the sizes
    mc.fill_after_resize = (size & 1) == 0;
    const int64_t bound = prepare_bytes(h, mc);
    const int64_t prepare_peak = measure([&] {
        try {
            const PreparedImage p = prepare_image(img, mc);
            (void)p;
        } catch (const kimi::Error&) {
            kimi::fuzz::note_refusal("prepare");
        }
    });
    fuzz_assert(prepare_peak <= bound, detail_of(h, "prepare", prepare_peak, bound));
    if (verbose())
        std::fprintf(stderr, "%s %dx%d %s: decode %lld / %lld, prepare %lld / %lld\n", h.format.c_str(), h.width,
                     h.height, pixel_mode_name(h.mode), static_cast<long long>(decode_peak),
                     static_cast<long long>(h.decode_bytes), static_cast<long long>(prepare_peak),
                     static_cast<long long>(bound));
    return 0;
}
