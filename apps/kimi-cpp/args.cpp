// ArgParser implementation (see args.h).
#include "args.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace kimi::app {

namespace {

// What --help shows, recorded as the accessors are asked (one parser a process asks for help).
struct FlagDoc {
    std::string name, value, def, help;
};
struct HelpRecord {
    bool asked = false;
    std::string command;
    std::vector<FlagDoc> flags;
    std::vector<std::string> names;   // every flag asked for (also without --help: "did you mean")
};
HelpRecord& record() {
    static HelpRecord r;
    return r;
}

std::string help_text(const HelpRecord& r) {
    std::string usage = "usage: kimi-cpp " + r.command, body;
    size_t width = 0;
    std::vector<std::string> left;
    for (const FlagDoc& f : r.flags) {
        const bool positional = f.name.rfind("-", 0) != 0;
        if (positional) usage += " " + f.name;
        left.push_back(positional ? f.name : f.name + (f.value.empty() ? "" : " " + f.value));
        width = std::max(width, left.back().size());
    }
    usage += " [flags]\n\nflags:\n";
    for (size_t i = 0; i < r.flags.size(); ++i) {
        const FlagDoc& f = r.flags[i];
        std::string line = "  " + left[i] + std::string(width + 2 - left[i].size(), ' ');
        std::string what = f.help;
        if (!f.def.empty()) what += (what.empty() ? "" : " ") + std::string("(") + f.def + ")";
        body += line + what + "\n";
    }
    return usage + body;
}

// Edit distance, for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
            diag = up;
        }
    }
    return row[b.size()];
}

}   // namespace

std::optional<std::string> help_so_far() {
    if (!record().asked) return std::nullopt;
    return help_text(record());
}

ArgParser::ArgParser(std::string command, int argc, char** argv)
    : command_(std::move(command)), words_(argv, argv + argc), used_(size_t(argc), false) {
    for (size_t i = 0; i < words_.size(); ++i)
        if (words_[i] == "--help" || words_[i] == "-h") used_[i] = help_ = true;
    HelpRecord& r = record();
    r = HelpRecord{};
    r.asked = help_;
    r.command = command_;
}

void ArgParser::note(const std::string& name, const std::string& value, const std::string& def, const char* help) {
    HelpRecord& r = record();
    for (const std::string& n : r.names)
        if (n == name) return;
    r.names.push_back(name);
    r.flags.push_back({name, value, def, help ? help : ""});
}

static bool matches(const std::string& w, const std::string& name) {
    return w == name || (w.size() > name.size() && w.compare(0, name.size(), name) == 0 && w[name.size()] == '=');
}

bool ArgParser::flag(const std::string& name, const char* help) {
    note(name, "", "", help);
    bool seen = false;
    for (size_t i = 0; i < words_.size(); ++i) {
        if (!used_[i] && words_[i] == name) used_[i] = seen = true;
    }
    return seen;
}

bool ArgParser::has(const std::string& name) const {
    for (size_t i = 0; i < words_.size(); ++i)
        if (!used_[i] && matches(words_[i], name)) return true;
    return false;
}

std::optional<std::string> ArgParser::take(const std::string& name) {
    if (help_) return std::nullopt;   // --help: every flag at its default
    for (size_t i = 0; i < words_.size(); ++i) {
        if (used_[i] || !matches(words_[i], name)) continue;
        used_[i] = true;
        if (words_[i].size() > name.size()) return words_[i].substr(name.size() + 1);
        if (i + 1 >= words_.size()) throw Error(command_ + ": " + name + " needs a value");
        used_[i + 1] = true;
        return words_[i + 1];
    }
    return std::nullopt;
}

std::optional<std::string> ArgParser::opt(const std::string& name, const char* help) {
    note(name, "S", "", help);
    auto v = take(name);
    if (v && take(name)) throw Error(command_ + ": " + name + " given more than once");
    return v;
}

std::string ArgParser::str(const std::string& name, const std::string& def, const char* help) {
    note(name, "S", def.empty() ? "" : "default " + def, help);
    return opt(name).value_or(def);
}

std::string ArgParser::required(const std::string& name, const char* help) {
    note(name, "S", "required", help);
    auto v = opt(name);
    if (!v && !help_) throw Error(command_ + ": " + name + " is required");
    return v.value_or("");
}

int64_t ArgParser::integer(const std::string& name, int64_t def, const char* help) {
    note(name, "N", "default " + std::to_string(def), help);
    auto v = opt(name);
    return v ? parse_int(command_ + " " + name, *v) : def;
}

double ArgParser::real(const std::string& name, double def, const char* help) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", def);
    note(name, "X", std::string("default ") + buf, help);
    auto v = opt(name);
    return v ? parse_real(command_ + " " + name, *v) : def;
}

int64_t ArgParser::integer(const std::string& name, int64_t def, int64_t lo, int64_t hi, const char* help) {
    const std::string range =
        hi == INT64_MAX ? ">= " + std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
    note(name, "N", "default " + std::to_string(def) + "; " + range, help);
    const int64_t v = integer(name, def);
    if (v < lo || v > hi)
        throw Error(name +
                    (hi == INT64_MAX ? " must be at least " + std::to_string(lo)
                                     : " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]") +
                    ", got " + std::to_string(v));
    return v;
}

double ArgParser::real(const std::string& name, double def, double lo, double hi, bool lo_open, const char* help) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "default %g; %s%g, %g]", def, lo_open ? "(" : "[", lo, hi);
    note(name, "X", buf, help);
    const double v = real(name, def);
    if (!(lo_open ? v > lo : v >= lo) || !(v <= hi)) {
        std::snprintf(buf, sizeof buf, " must be in %s%g, %g], got %g", lo_open ? "(" : "[", lo, hi, v);
        throw Error(name + buf);
    }
    return v;
}

std::vector<std::string> ArgParser::list(const std::string& name, const char* help) {
    note(name, "S", "repeatable", help);
    std::vector<std::string> out;
    while (auto v = take(name)) out.push_back(*v);
    return out;
}

std::vector<std::string> ArgParser::values(const std::string& name, const char* help) {
    note(name, "S...", "repeatable", help);
    std::vector<std::string> out;
    if (help_) return out;
    for (size_t i = 0; i < words_.size(); ++i) {
        if (used_[i] || !matches(words_[i], name)) continue;
        used_[i] = true;
        if (words_[i].size() > name.size()) {
            out.push_back(words_[i].substr(name.size() + 1));
            continue;
        }
        size_t j = i + 1;
        for (; j < words_.size() && !used_[j] && words_[j].rfind("--", 0) != 0; ++j) {
            used_[j] = true;
            out.push_back(words_[j]);
        }
        if (j == i + 1) throw Error(command_ + ": " + name + " needs a value");
    }
    return out;
}

std::string ArgParser::choice(const std::string& name, const std::string& def, const std::vector<std::string>& allowed,
                              const char* help) {
    std::string all;
    for (const auto& a : allowed) all += (all.empty() ? "" : "|") + a;
    note(name, all, def.empty() ? "" : "default " + def, help);
    std::string v = str(name, def);
    for (const auto& a : allowed)
        if (a == v) return v;
    throw Error(command_ + ": " + name + " must be one of " + all + ", got '" + v + "'");
}

std::vector<std::string> ArgParser::positionals(const char* what, const char* help) {
    note(what, "", "", help);
    std::vector<std::string> out;
    if (help_) return out;
    for (size_t i = 0; i < words_.size(); ++i) {
        if (used_[i] || (words_[i].size() > 2 && words_[i].compare(0, 2, "--") == 0)) continue;
        used_[i] = true;
        out.push_back(words_[i]);
    }
    return out;
}

void ArgParser::done() {
    if (help_) throw HelpShown{help_text(record())};
    for (size_t i = 0; i < words_.size(); ++i) {
        if (used_[i]) continue;
        const std::string w = words_[i].substr(0, words_[i].find('='));
        std::string best;
        size_t best_d = 4;   // suggest within 3 edits, or a flag the word begins
        for (const std::string& n : record().names) {
            if (n.rfind("-", 0) != 0) continue;
            const size_t d = n.rfind(w, 0) == 0 && w.size() > 3 ? 1 : distance(w, n);
            if (d < best_d) best_d = d, best = n;
        }
        throw Error("unknown argument '" + words_[i] + "'" + (best.empty() ? "" : " (did you mean " + best + "?)") +
                    "; see kimi-cpp " + command_ + " --help");
    }
}

int64_t parse_int(const std::string& what, const std::string& s) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE) throw Error(what + ": not an integer: '" + s + "'");
    return v;
}

double parse_real(const std::string& what, const std::string& s) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE) throw Error(what + ": not a number: '" + s + "'");
    return v;
}

std::vector<int32_t> parse_int_list(const std::string& what, const std::string& s) {
    std::vector<int32_t> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        if (comma == std::string::npos) comma = s.size();
        const std::string item = s.substr(pos, comma - pos);
        const int64_t v = parse_int(what, item);
        if (v < INT32_MIN || v > INT32_MAX) throw Error(what + ": out of range: " + item);
        out.push_back(int32_t(v));
        pos = comma + 1;
    }
    return out;
}

}   // namespace kimi::app
