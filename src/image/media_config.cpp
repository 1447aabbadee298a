// parse_media_config: preprocessor_config.json's `media_proc_cfg` → MediaConfig. Absent keys keep
// the defaults; wrong types, out-of-range values and settings the image pipeline does not
// implement (fixed_output_tokens, non-square merge kernels, unknown background patterns) are
// one-line kimi::Errors naming the key and the file. Video-only settings do not touch still
// images and are ignored, as are keys this pipeline does not know.
#include <cmath>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "image/preprocess.h"

namespace kimi::image {
namespace {

using nlohmann::json;

// Bounds that keep every size product of the geometry inside int32 / int64.
constexpr int64_t kMaxPatchSize = 1024;
constexpr int64_t kMaxMergeKernel = 64;
constexpr int64_t kMaxSidePatches = int64_t{1} << 20;
constexpr int64_t kMaxPatchLimit = int64_t{1} << 40;
constexpr int64_t kMaxSquareSize = int64_t{1} << 20;

class Reader {
public:
    Reader(const std::string& source, std::string prefix) : source_(source), prefix_(std::move(prefix)) {}

    [[noreturn]] void fail(const std::string& key, const std::string& what, const json& v) const {
        std::string shown = v.dump();
        if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
        throw Error(source_ + ": " + prefix_ + key + " " + what + ", got " + shown);
    }

    int64_t integer(const json& obj, const std::string& key, int64_t lo, int64_t hi, int64_t dflt) const {
        const auto it = obj.find(key);
        if (it == obj.end()) return dflt;
        return integer_value(*it, key, lo, hi);
    }

    int64_t integer_value(const json& v, const std::string& key, int64_t lo, int64_t hi) const {
        const std::string range = "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        if (!v.is_number_integer()) fail(key, range, v);
        // nlohmann keeps non-negative integers unsigned: compare before converting.
        if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) fail(key, range, v);
        const int64_t x = v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
        if (x < lo || x > hi) fail(key, range, v);
        return x;
    }

    // A number or a list of three numbers (one per RGB channel).
    void triple(const json& obj, const std::string& key, bool positive, double out[3]) const {
        const auto it = obj.find(key);
        if (it == obj.end()) return;
        const char* what = positive ? "must be a positive number or a list of 3" : "must be a number or a list of 3";
        auto number = [&](const json& v) {
            if (!v.is_number()) fail(key, what, *it);
            const double x = v.get<double>();
            if (!std::isfinite(x) || (positive && !(x > 0.0))) fail(key, what, *it);
            return x;
        };
        if (it->is_array()) {
            if (it->size() != 3) fail(key, what, *it);
            for (size_t i = 0; i < 3; ++i) out[i] = number((*it)[i]);
        } else {
            out[0] = out[1] = out[2] = number(*it);
        }
    }

    std::string string(const json& obj, const std::string& key, const std::string& dflt) const {
        const auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) return dflt;
        if (!it->is_string()) fail(key, "must be a string", *it);
        return it->get<std::string>();
    }

    bool boolean(const json& obj, const std::string& key, bool dflt) const {
        const auto it = obj.find(key);
        if (it == obj.end()) return dflt;
        if (!it->is_boolean()) fail(key, "must be true or false", *it);
        return it->get<bool>();
    }

private:
    const std::string& source_;
    std::string prefix_;
};

void parse_background(const json& bg, const std::string& source, MediaConfig& c) {
    const Reader r(source, "media_proc_cfg.transparent_bg_config.");
    if (!bg.is_object())
        Reader(source, "media_proc_cfg.").fail("transparent_bg_config", "must be an object or null", bg);
    // Every key here changes the pixels, so an unknown one is an error rather than ignored.
    for (const auto& [key, value] : bg.items()) {
        if (key != "pattern" && key != "chessboard_square_size" && key != "chessboard_square_on_top_left" &&
            key != "chessboard_white_value" && key != "chessboard_gray_value") {
            r.fail(key, "is not a known transparent-background setting", value);
        }
    }
    c.has_transparent_bg = true;
    c.bg_pattern = r.string(bg, "pattern", c.bg_pattern);
    if (c.bg_pattern != "white" && c.bg_pattern != "black" && c.bg_pattern != "gray" && c.bg_pattern != "chessboard") {
        r.fail("pattern", "must be \"white\", \"black\", \"gray\" or \"chessboard\"", bg.at("pattern"));
    }
    c.chessboard_square_size =
        static_cast<int32_t>(r.integer(bg, "chessboard_square_size", 1, kMaxSquareSize, c.chessboard_square_size));
    c.chessboard_square_on_top_left = r.boolean(bg, "chessboard_square_on_top_left", c.chessboard_square_on_top_left);
    c.chessboard_white_value =
        static_cast<int32_t>(r.integer(bg, "chessboard_white_value", 0, 255, c.chessboard_white_value));
    c.chessboard_gray_value =
        static_cast<int32_t>(r.integer(bg, "chessboard_gray_value", 0, 255, c.chessboard_gray_value));
}

}   // namespace

MediaConfig parse_media_config(const nlohmann::json& preprocessor_config, const std::string& source) {
    if (!preprocessor_config.is_object()) throw Error(source + ": not a JSON object");
    const auto cfg = preprocessor_config.find("media_proc_cfg");
    if (cfg == preprocessor_config.end() || !cfg->is_object()) throw Error(source + ": no media_proc_cfg object");
    const json& m = *cfg;
    const Reader r(source, "media_proc_cfg.");
    MediaConfig c;

    c.patch_size = static_cast<int32_t>(r.integer(m, "patch_size", 1, kMaxPatchSize, c.patch_size));
    if (const auto it = m.find("merge_kernel_size"); it != m.end()) {
        if (it->is_array()) {
            if (it->size() != 2) r.fail("merge_kernel_size", "must be an integer or a list of 2", *it);
            const int64_t kh = r.integer_value((*it)[0], "merge_kernel_size", 1, kMaxMergeKernel);
            const int64_t kw = r.integer_value((*it)[1], "merge_kernel_size", 1, kMaxMergeKernel);
            if (kh != kw) r.fail("merge_kernel_size", "must be square: the token merge takes square cells only", *it);
            c.merge_kernel_size = static_cast<int32_t>(kh);
        } else {
            c.merge_kernel_size = static_cast<int32_t>(r.integer_value(*it, "merge_kernel_size", 1, kMaxMergeKernel));
        }
    }
    c.in_patch_limit = r.integer(m, "in_patch_limit", 1, kMaxPatchLimit, c.in_patch_limit);
    c.patch_limit_on_one_side =
        static_cast<int32_t>(r.integer(m, "patch_limit_on_one_side", 1, kMaxSidePatches, c.patch_limit_on_one_side));
    static_assert(kMaxSidePatches * kMaxPatchSize <= INT32_MAX, "the longest side in pixels must stay an int32");

    double mean[3] = {c.image_mean[0], c.image_mean[1], c.image_mean[2]};
    r.triple(m, "image_mean", false, mean);
    r.triple(m, "image_std", true, c.image_std_exact);
    for (int i = 0; i < 3; ++i) {
        c.image_mean[i] = static_cast<float>(mean[i]);
        c.image_std[i] = static_cast<float>(c.image_std_exact[i]);
        if (!(c.image_std[i] > 0.0f) || !std::isfinite(c.image_std[i])) {
            r.fail("image_std", "must be a positive float32", m.at("image_std"));
        }
    }

    if (const auto it = m.find("transparent_bg_config"); it != m.end()) {
        if (it->is_null()) {
            c.has_transparent_bg = false;
        } else {
            parse_background(*it, source, c);
        }
    }
    const std::string stage = r.string(m, "transparent_bg_fill_stage", "after_resize");
    if (stage != "after_resize" && stage != "before_resize") {
        r.fail("transparent_bg_fill_stage", "must be \"after_resize\" or \"before_resize\"",
               m.at("transparent_bg_fill_stage"));
    }
    c.fill_after_resize = stage == "after_resize";

    if (const auto it = m.find("fixed_output_tokens"); it != m.end() && !it->is_null()) {
        r.fail("fixed_output_tokens", "must be null: image tokens are always sized from the image", *it);
    }
    return c;
}

}   // namespace kimi::image
