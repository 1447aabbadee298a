// PNG chart writer (see plot.h).
#include "bench/plot.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "bench/stats.h"
#include "core/error.h"

namespace kimi::bench {
namespace {

struct Rgb {
    uint8_t r, g, b;
};
const Rgb kPalette[] = {{31, 119, 180},  {214, 39, 40}, {44, 160, 44},   {255, 127, 14},
                        {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};
const Rgb kBlack{0, 0, 0}, kGrey{200, 200, 200}, kWhite{255, 255, 255};

// Stroke font on a 4×6 grid (y down): polylines of "x y x y ..." separated by '|'.
const char* glyph(char c) {
    switch (c) {
        case 'A': return "0 6 0 2 2 0 4 2 4 6|0 3 4 3";
        case 'B': return "0 0 0 6 3 6 4 5 4 4 3 3 0 3|0 0 3 0 4 1 4 2 3 3";
        case 'C': return "4 0 0 0 0 6 4 6";
        case 'D': return "0 0 0 6 2 6 4 4 4 2 2 0 0 0";
        case 'E': return "4 0 0 0 0 6 4 6|0 3 3 3";
        case 'F': return "4 0 0 0 0 6|0 3 3 3";
        case 'G': return "4 1 4 0 0 0 0 6 4 6 4 3 2 3";
        case 'H': return "0 0 0 6|4 0 4 6|0 3 4 3";
        case 'I': return "1 0 3 0|2 0 2 6|1 6 3 6";
        case 'J': return "4 0 4 6 0 6 0 4";
        case 'K': return "0 0 0 6|4 0 0 3 4 6";
        case 'L': return "0 0 0 6 4 6";
        case 'M': return "0 6 0 0 2 3 4 0 4 6";
        case 'N': return "0 6 0 0 4 6 4 0";
        case 'O':
        case '0': return "0 0 4 0 4 6 0 6 0 0";
        case 'P': return "0 6 0 0 4 0 4 3 0 3";
        case 'Q': return "0 0 4 0 4 6 0 6 0 0|2 4 4 6";
        case 'R': return "0 6 0 0 4 0 4 3 0 3 4 6";
        case 'S':
        case '5': return "4 0 0 0 0 3 4 3 4 6 0 6";
        case 'T': return "0 0 4 0|2 0 2 6";
        case 'U': return "0 0 0 6 4 6 4 0";
        case 'V': return "0 0 2 6 4 0";
        case 'W': return "0 0 1 6 2 3 3 6 4 0";
        case 'X': return "0 0 4 6|4 0 0 6";
        case 'Y': return "0 0 2 3 4 0|2 3 2 6";
        case 'Z': return "0 0 4 0 0 6 4 6";
        case '1': return "1 1 2 0 2 6|1 6 3 6";
        case '2': return "0 0 4 0 4 3 0 3 0 6 4 6";
        case '3': return "0 0 4 0 4 6 0 6|1 3 4 3";
        case '4': return "0 0 0 3 4 3|4 0 4 6";
        case '6': return "4 0 0 0 0 6 4 6 4 3 0 3";
        case '7': return "0 0 4 0 2 6";
        case '8': return "0 0 4 0 4 6 0 6 0 0|0 3 4 3";
        case '9': return "4 3 0 3 0 0 4 0 4 6 0 6";
        case '.': return "2 6 2 5";
        case ',': return "2 5 1 7";
        case '-': return "1 3 3 3";
        case '+': return "1 3 3 3|2 2 2 4";
        case '=': return "1 2 3 2|1 4 3 4";
        case '%': return "0 6 4 0|0 0 1 0 1 1 0 1 0 0|3 5 4 5 4 6 3 6 3 5";
        case '(': return "3 0 2 1 2 5 3 6";
        case ')': return "1 0 2 1 2 5 1 6";
        case ':': return "2 1 2 2|2 4 2 5";
        case '/': return "0 6 4 0";
        case '_': return "0 6 4 6";
        default: return "";
    }
}

class Canvas {
public:
    Canvas(int w, int h) : w_(w), h_(h), px_(size_t(w) * size_t(h), kWhite) {}
    void set(int x, int y, Rgb c) {
        if (x >= 0 && y >= 0 && x < w_ && y < h_) px_[size_t(y) * size_t(w_) + size_t(x)] = c;
    }
    void line(double x0, double y0, double x1, double y1, Rgb c, int thick = 1) {
        const int n = int(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0))) + 1;
        for (int i = 0; i <= n; ++i) {
            const double t = double(i) / n;
            const int x = int(std::lround(x0 + (x1 - x0) * t)), y = int(std::lround(y0 + (y1 - y0) * t));
            for (int dx = 0; dx < thick; ++dx)
                for (int dy = 0; dy < thick; ++dy) set(x + dx - thick / 2, y + dy - thick / 2, c);
        }
    }
    void rect(int x, int y, int w, int h, Rgb c) {
        for (int j = 0; j < h; ++j)
            for (int i = 0; i < w; ++i) set(x + i, y + j, c);
    }
    // Text with its top-left at (x, y); scale = pixels per grid unit. Returns the width.
    int text(int x, int y, const std::string& s, Rgb c, int scale = 2) {
        int cx = x;
        for (char ch : s) {
            const char up = char(std::toupper(static_cast<unsigned char>(ch)));
            const char* g = glyph(up);
            std::vector<int> pts;
            auto flush = [&] {
                for (size_t k = 2; k + 1 < pts.size(); k += 2)
                    line(cx + pts[k - 2] * scale, y + pts[k - 1] * scale, cx + pts[k] * scale, y + pts[k + 1] * scale,
                         c);
                if (pts.size() == 2) set(cx + pts[0] * scale, y + pts[1] * scale, c);
                pts.clear();
            };
            for (const char* p = g; *p; ++p) {
                if (*p == '|')
                    flush();
                else if (*p >= '0' && *p <= '9')
                    pts.push_back(*p - '0');
            }
            flush();
            cx += 6 * scale;
        }
        return cx - x;
    }
    static int text_width(const std::string& s, int scale = 2) { return int(s.size()) * 6 * scale; }

    void write_png(const std::string& path) const {
        std::vector<uint8_t> raw;
        raw.reserve(size_t(h_) * (size_t(w_) * 3 + 1));
        for (int y = 0; y < h_; ++y) {
            raw.push_back(0);   // filter: none
            for (int x = 0; x < w_; ++x) {
                const Rgb& p = px_[size_t(y) * size_t(w_) + size_t(x)];
                raw.insert(raw.end(), {p.r, p.g, p.b});
            }
        }
        uLongf zlen = compressBound(uLong(raw.size()));
        std::vector<uint8_t> z(zlen);
        if (compress2(z.data(), &zlen, raw.data(), uLong(raw.size()), 9) != Z_OK)
            throw Error("png: compression failed");
        z.resize(zlen);
        std::ofstream f(path, std::ios::binary);
        if (!f) throw Error(path + ": cannot create");
        const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
        f.write(reinterpret_cast<const char*>(sig), 8);
        auto be32 = [](std::vector<uint8_t>& v, uint32_t x) {
            for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
        };
        auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
            std::vector<uint8_t> c;
            be32(c, uint32_t(data.size()));
            c.insert(c.end(), type, type + 4);
            c.insert(c.end(), data.begin(), data.end());
            const uint32_t crc = uint32_t(crc32(crc32(0, nullptr, 0), c.data() + 4, uInt(c.size() - 4)));
            be32(c, crc);
            f.write(reinterpret_cast<const char*>(c.data()), std::streamsize(c.size()));
        };
        std::vector<uint8_t> ihdr;
        be32(ihdr, uint32_t(w_));
        be32(ihdr, uint32_t(h_));
        ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});   // 8-bit RGB
        chunk("IHDR", ihdr);
        chunk("IDAT", z);
        chunk("IEND", {});
        if (!f) throw Error(path + ": write failed");
    }

private:
    int w_, h_;
    std::vector<Rgb> px_;
};

std::string fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

// Axes in the pixel box [x, x+w] × [y, y+h] for data [x0, x1] × [y0, y1].
struct Axes {
    Canvas& c;
    int x, y, w, h;
    double x0, x1, y0, y1;
    double px(double v) const { return x + (v - x0) / (x1 - x0) * w; }
    double py(double v) const { return y + h - (v - y0) / (y1 - y0) * h; }
    void draw(const std::string& title, const std::string& xl, const std::string& yl) {
        c.text(x, y - 44, title, kBlack, 2);
        c.text(x, y - 20, yl, kBlack, 1);
        c.text(x + w - Canvas::text_width(xl, 1), y + h + 28, xl, kBlack, 1);
        for (int i = 0; i <= 4; ++i) {
            const double vy = y0 + (y1 - y0) * i / 4, vx = x0 + (x1 - x0) * i / 4;
            c.line(x, py(vy), x + w, py(vy), kGrey);
            c.text(x - 6 - Canvas::text_width(fmt(vy), 1), int(py(vy)) - 3, fmt(vy), kBlack, 1);
            c.line(px(vx), y + h, px(vx), y + h + 4, kBlack);
            c.text(int(px(vx)) - Canvas::text_width(fmt(vx), 1) / 2, y + h + 8, fmt(vx), kBlack, 1);
        }
        c.line(x, y, x, y + h, kBlack);
        c.line(x, y + h, x + w, y + h, kBlack);
    }
    void legend(const std::vector<PlotSeries>& s) {
        int ly = y + 6;
        for (size_t i = 0; i < s.size(); ++i, ly += 16) {
            c.rect(x + w - 110, ly, 10, 10, kPalette[i % std::size(kPalette)]);
            c.text(x + w - 94, ly, s[i].name, kBlack, 1);
        }
    }
};

void bounds(const std::vector<PlotSeries>& series, double& x0, double& x1, double& y0, double& y1) {
    x0 = y0 = 1e300;
    x1 = y1 = -1e300;
    for (const auto& s : series)
        for (const auto& [x, y] : s.points) {
            x0 = std::min(x0, x);
            x1 = std::max(x1, x);
            y0 = std::min(y0, y);
            y1 = std::max(y1, y);
        }
    if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
    const double pad = std::max(1e-9, (y1 - y0) * 0.1 + std::fabs(y1) * 0.02);
    y0 = std::max(0.0, y0 - pad);
    y1 += pad;
}

void draw_lines(Axes& a, const std::vector<PlotSeries>& series) {
    for (size_t i = 0; i < series.size(); ++i) {
        const Rgb col = kPalette[i % std::size(kPalette)];
        const auto& p = series[i].points;
        for (size_t k = 0; k < p.size(); ++k) {
            a.c.rect(int(a.px(p[k].first)) - 3, int(a.py(p[k].second)) - 3, 7, 7, col);
            if (k) a.c.line(a.px(p[k - 1].first), a.py(p[k - 1].second), a.px(p[k].first), a.py(p[k].second), col, 2);
        }
    }
}

}   // namespace

void write_decode_ab_plot(const std::string& path, const std::vector<PlotSeries>& tpot_per_run,
                          const std::vector<PlotSeries>& itl_samples) {
    Canvas c(1000, 420);
    // Left: TPOT per run, with each variant's mean ± std as an error bar right of the runs.
    double x0, x1, y0, y1;
    bounds(tpot_per_run, x0, x1, y0, y1);
    for (const auto& s : tpot_per_run) {
        std::vector<double> ys;
        for (const auto& pt : s.points) ys.push_back(pt.second);
        y1 = std::max(y1, mean(ys) + pop_std(ys) * 1.2);
        y0 = std::max(0.0, std::min(y0, mean(ys) - pop_std(ys) * 1.2));
    }
    Axes left{c, 80, 70, 380, 290, x0 - 0.5, x1 + 1.0, y0, y1};
    left.draw("TPOT per run (ms)", "run", "ms");
    draw_lines(left, tpot_per_run);
    for (size_t i = 0; i < tpot_per_run.size(); ++i) {
        std::vector<double> ys;
        for (const auto& pt : tpot_per_run[i].points) ys.push_back(pt.second);
        const double m = mean(ys), sd = pop_std(ys), bx = left.px(x1 + 0.5) + double(i) * 10 - 5;
        const Rgb col = kPalette[i % std::size(kPalette)];
        left.c.line(bx, left.py(m - sd), bx, left.py(m + sd), col, 2);
        left.c.line(bx - 4, left.py(m - sd), bx + 4, left.py(m - sd), col);
        left.c.line(bx - 4, left.py(m + sd), bx + 4, left.py(m + sd), col);
        left.c.rect(int(bx) - 2, int(left.py(m)) - 2, 5, 5, col);
    }
    left.legend(tpot_per_run);

    // Right: ITL histograms over [min, p99.5] in 30 bins, as fractions.
    std::vector<double> all;
    for (const auto& s : itl_samples) all.insert(all.end(), s.values.begin(), s.values.end());
    double lo = all.empty() ? 0 : *std::min_element(all.begin(), all.end());
    double hi = all.empty() ? 1 : percentile(all, 99.5);
    if (hi - lo < 1e-9) hi = lo + 1e-3;
    const int bins = 30;
    std::vector<PlotSeries> hist;
    double top = 0;
    for (const auto& s : itl_samples) {
        std::vector<double> cnt(bins, 0.0);
        for (double v : s.values) cnt[size_t(std::clamp(int((v - lo) / (hi - lo) * bins), 0, bins - 1))] += 1;
        PlotSeries h;
        h.name = s.name;
        for (int b = 0; b < bins; ++b) {
            const double f = s.values.empty() ? 0 : cnt[size_t(b)] / double(s.values.size());
            h.points.push_back({lo + (hi - lo) * b / bins, f});
            h.points.push_back({lo + (hi - lo) * (b + 1) / bins, f});
            top = std::max(top, f);
        }
        hist.push_back(std::move(h));
    }
    Axes right{c, 580, 70, 380, 290, lo, hi, 0.0, std::max(top * 1.1, 1e-6)};
    right.draw("ITL distribution", "ITL (ms)", "fraction of gaps");
    for (size_t i = 0; i < hist.size(); ++i) {
        const auto& p = hist[i].points;
        for (size_t k = 1; k < p.size(); ++k)
            c.line(right.px(p[k - 1].first), right.py(p[k - 1].second), right.px(p[k].first), right.py(p[k].second),
                   kPalette[i % std::size(kPalette)], 2);
    }
    right.legend(itl_samples);
    c.write_png(path);
}

void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<PlotSeries>& series) {
    write_line_plots(path, {LineChart{title, x_label, y_label, series}});
}

void write_line_plots(const std::string& path, const std::vector<LineChart>& charts) {
    Canvas c(640 * std::max<int>(1, int(charts.size())), 420);
    for (size_t i = 0; i < charts.size(); ++i) {
        double x0, x1, y0, y1;
        bounds(charts[i].series, x0, x1, y0, y1);
        Axes a{c, 80 + 640 * int(i), 70, 520, 290, x0, x1, y0, y1};
        a.draw(charts[i].title, charts[i].x_label, charts[i].y_label);
        draw_lines(a, charts[i].series);
        a.legend(charts[i].series);
    }
    c.write_png(path);
}

}   // namespace kimi::bench
