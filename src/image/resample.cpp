// Pillow 9.4's BICUBIC and NEAREST resize, byte-identical (see resample.h). The arithmetic
// follows libImaging step by step (float box edges, double filter weights normalised per output
// pixel, 22-bit fixed-point coefficients, clip after >> 22), because every rounding shows in the
// output bytes; the loops are our own: separable passes, integer coefficients computed once per
// axis, row-wise vertical accumulation, no per-pixel allocation.
#include "image/resample.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace kimi::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;   // Pillow's PRECISION_BITS: 8-bit result, 2 bits headroom
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);
constexpr double kBicubicSupport = 2.0;
// The largest side a resize accepts: keeps every index and the filter support in int32.
constexpr int32_t kMaxSide = 1 << 24;

double bicubic_filter(double x) {
    constexpr double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// One axis: for each output index the first input index, how many inputs, and their weights.
struct Coeffs {
    int32_t ksize = 0;
    std::vector<int32_t> first, count;
    std::vector<double> k;   // [out, ksize], each row normalised to sum 1
};

Coeffs precompute_coeffs(int32_t in_size, int32_t out_size) {
    // Pillow takes the box edges as floats (exact below 2^24) and the scale in double.
    const float in0 = 0.0f, in1 = static_cast<float>(in_size);
    const double scale = static_cast<double>(in1 - in0) / out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = kBicubicSupport * filterscale;
    Coeffs c;
    c.ksize = static_cast<int32_t>(std::ceil(support)) * 2 + 1;
    c.first.resize(static_cast<size_t>(out_size));
    c.count.resize(static_cast<size_t>(out_size));
    c.k.assign(static_cast<size_t>(out_size) * static_cast<size_t>(c.ksize), 0.0);
    const double ss = 1.0 / filterscale;
    for (int32_t xx = 0; xx < out_size; ++xx) {
        const double center = in0 + (xx + 0.5) * scale;
        int32_t xmin = static_cast<int32_t>(center - support + 0.5);   // truncation, as Pillow rounds
        if (xmin < 0) xmin = 0;
        int32_t xmax = static_cast<int32_t>(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        KIMI_CHECK(xmax >= 1 && xmax <= c.ksize, "resample: filter window out of range");
        double* k = &c.k[static_cast<size_t>(xx) * static_cast<size_t>(c.ksize)];
        double ww = 0.0;
        for (int32_t x = 0; x < xmax; ++x) {
            const double w = bicubic_filter((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        if (ww != 0.0) {
            for (int32_t x = 0; x < xmax; ++x) k[x] /= ww;
        }
        c.first[static_cast<size_t>(xx)] = xmin;
        c.count[static_cast<size_t>(xx)] = xmax;
    }
    return c;
}

// Pillow's normalize_coeffs_8bpc: round half away from zero by truncating v ± 0.5. Also proves
// that no accumulator can overflow: 255 · Σ|k| + 2^21 stays below 2^31 for every output.
std::vector<int32_t> fixed_coeffs(const Coeffs& c) {
    std::vector<int32_t> kk(c.k.size());
    for (size_t i = 0; i < c.k.size(); ++i) {
        const double v = c.k[i];
        kk[i] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits))
                      : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
    }
    for (size_t o = 0; o < c.count.size(); ++o) {
        int64_t abs_sum = 0;
        for (int32_t x = 0; x < c.count[o]; ++x) abs_sum += std::abs(int64_t{kk[o * static_cast<size_t>(c.ksize) + x]});
        KIMI_CHECK(abs_sum * 255 + kHalf <= INT32_MAX, "resample: fixed-point accumulator could overflow");
    }
    return kk;
}

uint8_t clip8(int32_t ss) {
    const int32_t v = ss >> kPrecisionBits;   // arithmetic shift (C++20), as Pillow's lookup table
    return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

int32_t round_up(double ss) {   // Pillow's ROUND_UP, saturated instead of undefined
    const double r = ss >= 0.0 ? ss + 0.5 : ss - 0.5;
    if (r >= 2147483647.0) return INT32_MAX;
    if (r <= -2147483648.0) return INT32_MIN;
    return static_cast<int32_t>(r);
}

template <int C>
void horizontal_u8(const uint8_t* src, int32_t in_w, int32_t rows, const Coeffs& c, const std::vector<int32_t>& kk,
                   uint8_t* dst, int32_t out_w) {
    const size_t in_row = static_cast<size_t>(in_w) * C, out_row = static_cast<size_t>(out_w) * C;
    for (int32_t y = 0; y < rows; ++y) {
        const uint8_t* in = src + static_cast<size_t>(y) * in_row;
        uint8_t* out = dst + static_cast<size_t>(y) * out_row;
        for (int32_t xx = 0; xx < out_w; ++xx) {
            const int32_t* k = &kk[static_cast<size_t>(xx) * static_cast<size_t>(c.ksize)];
            const uint8_t* p = in + static_cast<size_t>(c.first[static_cast<size_t>(xx)]) * C;
            const int32_t n = c.count[static_cast<size_t>(xx)];
            int32_t ss[C];
            for (int ch = 0; ch < C; ++ch) ss[ch] = kHalf;
            for (int32_t x = 0; x < n; ++x) {
                for (int ch = 0; ch < C; ++ch) ss[ch] += p[x * C + ch] * k[x];
            }
            for (int ch = 0; ch < C; ++ch) out[static_cast<size_t>(xx) * C + ch] = clip8(ss[ch]);
        }
    }
}

// Integer sums are order-free, so each output row accumulates whole input rows.
void vertical_u8(const uint8_t* src, size_t row_len, const Coeffs& c, const std::vector<int32_t>& kk, int32_t out_h,
                 uint8_t* dst) {
    std::vector<int32_t> acc(row_len);
    for (int32_t yy = 0; yy < out_h; ++yy) {
        std::fill(acc.begin(), acc.end(), kHalf);
        const int32_t* k = &kk[static_cast<size_t>(yy) * static_cast<size_t>(c.ksize)];
        for (int32_t y = 0; y < c.count[static_cast<size_t>(yy)]; ++y) {
            const uint8_t* r = src + static_cast<size_t>(c.first[static_cast<size_t>(yy)] + y) * row_len;
            const int32_t kv = k[y];
            for (size_t i = 0; i < row_len; ++i) acc[i] += r[i] * kv;
        }
        uint8_t* out = dst + static_cast<size_t>(yy) * row_len;
        for (size_t i = 0; i < row_len; ++i) out[i] = clip8(acc[i]);
    }
}

void horizontal_i32(const int32_t* src, int32_t in_w, int32_t rows, const Coeffs& c, int32_t* dst, int32_t out_w) {
    for (int32_t y = 0; y < rows; ++y) {
        const int32_t* in = src + static_cast<size_t>(y) * static_cast<size_t>(in_w);
        int32_t* out = dst + static_cast<size_t>(y) * static_cast<size_t>(out_w);
        for (int32_t xx = 0; xx < out_w; ++xx) {
            const double* k = &c.k[static_cast<size_t>(xx) * static_cast<size_t>(c.ksize)];
            const int32_t* p = in + c.first[static_cast<size_t>(xx)];
            double ss = 0.0;
            for (int32_t x = 0; x < c.count[static_cast<size_t>(xx)]; ++x) ss += p[x] * k[x];
            out[xx] = round_up(ss);
        }
    }
}

// Double sums: per pixel in the same order as Pillow (input rows in increasing order).
void vertical_i32(const int32_t* src, int32_t w, const Coeffs& c, int32_t out_h, int32_t* dst) {
    std::vector<double> acc(static_cast<size_t>(w));
    for (int32_t yy = 0; yy < out_h; ++yy) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const double* k = &c.k[static_cast<size_t>(yy) * static_cast<size_t>(c.ksize)];
        for (int32_t y = 0; y < c.count[static_cast<size_t>(yy)]; ++y) {
            const int32_t* r = src + static_cast<size_t>(c.first[static_cast<size_t>(yy)] + y) * static_cast<size_t>(w);
            const double kv = k[y];
            for (size_t i = 0; i < acc.size(); ++i) acc[i] += r[i] * kv;
        }
        int32_t* out = dst + static_cast<size_t>(yy) * static_cast<size_t>(w);
        for (size_t i = 0; i < acc.size(); ++i) out[i] = round_up(acc[i]);
    }
}

void check_sizes(size_t src_elems, int32_t w, int32_t h, int elems_per_pixel, int32_t new_w, int32_t new_h) {
    if (w < 1 || h < 1 || new_w < 1 || new_h < 1 || w > kMaxSide || h > kMaxSide || new_w > kMaxSide ||
        new_h > kMaxSide) {
        throw Error("resize: unsupported size " + std::to_string(w) + "x" + std::to_string(h) + " -> " +
                    std::to_string(new_w) + "x" + std::to_string(new_h));
    }
    KIMI_CHECK(src_elems == static_cast<size_t>(w) * static_cast<size_t>(h) * static_cast<size_t>(elems_per_pixel),
               "resize: buffer does not match the size");
}

// Pillow's ImagingResampleInner: which passes run, and the rows the horizontal pass covers.
struct Plan {
    bool need_h = false, need_v = false;
    Coeffs vert;
    int32_t y_first = 0, y_last = 0;   // input rows the vertical pass reads
};

Plan make_plan(int32_t w, int32_t h, int32_t new_w, int32_t new_h) {
    Plan p;
    p.need_h = new_w != w;
    p.need_v = new_h != h;
    p.vert = precompute_coeffs(h, new_h);
    p.y_first = p.vert.first[0];
    p.y_last = p.vert.first[static_cast<size_t>(new_h) - 1] + p.vert.count[static_cast<size_t>(new_h) - 1];
    return p;
}

}   // namespace

std::vector<uint8_t> resize_bicubic_u8(std::span<const uint8_t> src, int32_t w, int32_t h, int channels, int32_t new_w,
                                       int32_t new_h) {
    KIMI_CHECK(channels >= 1 && channels <= 4, "resize: 1 to 4 channels");
    check_sizes(src.size(), w, h, channels, new_w, new_h);
    Plan p = make_plan(w, h, new_w, new_h);
    std::vector<uint8_t> tmp;
    const uint8_t* cur = src.data();
    int32_t cur_w = w;
    if (p.need_h) {
        const Coeffs hc = precompute_coeffs(w, new_w);
        const std::vector<int32_t> hk = fixed_coeffs(hc);
        const int32_t rows = p.y_last - p.y_first;
        tmp.resize(static_cast<size_t>(new_w) * static_cast<size_t>(rows) * static_cast<size_t>(channels));
        const uint8_t* in = src.data() + static_cast<size_t>(p.y_first) * static_cast<size_t>(w) * channels;
        switch (channels) {
            case 1: horizontal_u8<1>(in, w, rows, hc, hk, tmp.data(), new_w); break;
            case 2: horizontal_u8<2>(in, w, rows, hc, hk, tmp.data(), new_w); break;
            case 3: horizontal_u8<3>(in, w, rows, hc, hk, tmp.data(), new_w); break;
            default: horizontal_u8<4>(in, w, rows, hc, hk, tmp.data(), new_w); break;
        }
        for (auto& f : p.vert.first) f -= p.y_first;
        cur = tmp.data();
        cur_w = new_w;
    }
    if (p.need_v) {
        std::vector<uint8_t> out(static_cast<size_t>(new_w) * static_cast<size_t>(new_h) *
                                 static_cast<size_t>(channels));
        vertical_u8(cur, static_cast<size_t>(cur_w) * static_cast<size_t>(channels), p.vert, fixed_coeffs(p.vert),
                    new_h, out.data());
        return out;
    }
    if (p.need_h) return tmp;   // the vertical window of an unchanged height spans every row
    return std::vector<uint8_t>(src.begin(), src.end());
}

std::vector<int32_t> resize_bicubic_i32(std::span<const int32_t> src, int32_t w, int32_t h, int32_t new_w,
                                        int32_t new_h) {
    check_sizes(src.size(), w, h, 1, new_w, new_h);
    Plan p = make_plan(w, h, new_w, new_h);
    std::vector<int32_t> tmp;
    const int32_t* cur = src.data();
    if (p.need_h) {
        const Coeffs hc = precompute_coeffs(w, new_w);
        const int32_t rows = p.y_last - p.y_first;
        tmp.resize(static_cast<size_t>(new_w) * static_cast<size_t>(rows));
        horizontal_i32(src.data() + static_cast<size_t>(p.y_first) * static_cast<size_t>(w), w, rows, hc, tmp.data(),
                       new_w);
        for (auto& f : p.vert.first) f -= p.y_first;
        cur = tmp.data();
    }
    if (p.need_v) {
        std::vector<int32_t> out(static_cast<size_t>(new_w) * static_cast<size_t>(new_h));
        vertical_i32(cur, new_w, p.vert, new_h, out.data());
        return out;
    }
    if (p.need_h) return tmp;
    return std::vector<int32_t>(src.begin(), src.end());
}

std::vector<uint8_t> resize_nearest(std::span<const uint8_t> src, int32_t w, int32_t h, int pixel_bytes, int32_t new_w,
                                    int32_t new_h) {
    KIMI_CHECK(pixel_bytes >= 1 && pixel_bytes <= 8, "resize: pixel size");
    check_sizes(src.size(), w, h, pixel_bytes, new_w, new_h);
    // Pillow maps the output pixel centres back with an affine scale, accumulating the step in
    // double (so the rounding of repeated additions is part of the result); pixels that land
    // outside the input stay 0.
    const double ax = static_cast<double>(static_cast<float>(w) - 0.0f) / new_w;
    const double ay = static_cast<double>(static_cast<float>(h) - 0.0f) / new_h;
    auto coord = [](double v) { return v < 0.0 ? -1 : static_cast<int32_t>(v); };
    std::vector<int32_t> xin(static_cast<size_t>(new_w), -1);
    double xo = 0.0 + ax * 0.5;
    for (int32_t x = 0; x < new_w; ++x) {
        const int32_t xi = coord(xo);
        if (xi >= 0 && xi < w) xin[static_cast<size_t>(x)] = xi;
        xo += ax;
    }
    const size_t pb = static_cast<size_t>(pixel_bytes);
    const size_t in_row = static_cast<size_t>(w) * pb, out_row = static_cast<size_t>(new_w) * pb;
    std::vector<uint8_t> out(out_row * static_cast<size_t>(new_h), 0);
    double yo = 0.0 + ay * 0.5;
    for (int32_t y = 0; y < new_h; ++y) {
        const int32_t yi = coord(yo);
        if (yi >= 0 && yi < h) {
            const uint8_t* in = src.data() + static_cast<size_t>(yi) * in_row;
            uint8_t* o = out.data() + static_cast<size_t>(y) * out_row;
            for (int32_t x = 0; x < new_w; ++x) {
                const int32_t xi = xin[static_cast<size_t>(x)];
                if (xi >= 0) std::memcpy(o + static_cast<size_t>(x) * pb, in + static_cast<size_t>(xi) * pb, pb);
            }
        }
        yo += ay;
    }
    return out;
}

}   // namespace kimi::image
