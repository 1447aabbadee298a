// A small PNG chart writer for benchmark results (no plotting library): line/marker series
// and step histograms on axes with ticks, a stroke font for labels, PNG via zlib.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace kimi::bench {

struct PlotSeries {
    std::string name;
    std::vector<std::pair<double, double>> points;   // (x, y) for line charts
    std::vector<double> values;                      // raw samples for histograms
};

// Left: per-run TPOT of each variant (markers + lines, mean ± std bar at the right).
// Right: the ITL distribution of each variant (step histogram, fraction of gaps).
void write_decode_ab_plot(const std::string& path, const std::vector<PlotSeries>& tpot_per_run,
                          const std::vector<PlotSeries>& itl_samples);

// One line chart (x, y per series) — bench serve curves.
void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<PlotSeries>& series);

// Line charts side by side in one image — bench model's decode rows and speculation curves.
struct LineChart {
    std::string title, x_label, y_label;
    std::vector<PlotSeries> series;
};
void write_line_plots(const std::string& path, const std::vector<LineChart>& charts);

}   // namespace kimi::bench
