// ArgParser implementation (see args.h).
#include "args.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace kimi::app {

ArgParser::ArgParser(std::string command, int argc, char** argv)
    : command_(std::move(command)), words_(argv, argv + argc), used_(size_t(argc), false) {}

static bool matches(const std::string& w, const std::string& name) {
    return w == name || (w.size() > name.size() && w.compare(0, name.size(), name) == 0 && w[name.size()] == '=');
}

bool ArgParser::flag(const std::string& name) {
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

std::optional<std::string> ArgParser::opt(const std::string& name) {
    auto v = take(name);
    if (v && take(name)) throw Error(command_ + ": " + name + " given more than once");
    return v;
}

std::string ArgParser::str(const std::string& name, const std::string& def) { return opt(name).value_or(def); }

std::string ArgParser::required(const std::string& name) {
    auto v = opt(name);
    if (!v) throw Error(command_ + ": " + name + " is required");
    return *v;
}

int64_t ArgParser::integer(const std::string& name, int64_t def) {
    auto v = opt(name);
    return v ? parse_int(command_ + " " + name, *v) : def;
}

double ArgParser::real(const std::string& name, double def) {
    auto v = opt(name);
    return v ? parse_real(command_ + " " + name, *v) : def;
}

std::vector<std::string> ArgParser::list(const std::string& name) {
    std::vector<std::string> out;
    while (auto v = take(name)) out.push_back(*v);
    return out;
}

std::string ArgParser::choice(const std::string& name, const std::string& def,
                              const std::vector<std::string>& allowed) {
    std::string v = str(name, def);
    for (const auto& a : allowed)
        if (a == v) return v;
    std::string all;
    for (const auto& a : allowed) all += (all.empty() ? "" : "|") + a;
    throw Error(command_ + ": " + name + " must be one of " + all + ", got '" + v + "'");
}

std::vector<std::string> ArgParser::positionals() {
    std::vector<std::string> out;
    for (size_t i = 0; i < words_.size(); ++i) {
        if (used_[i] || (words_[i].size() > 2 && words_[i].compare(0, 2, "--") == 0)) continue;
        used_[i] = true;
        out.push_back(words_[i]);
    }
    return out;
}

void ArgParser::done() {
    for (size_t i = 0; i < words_.size(); ++i)
        if (!used_[i]) throw Error(command_ + ": unknown argument '" + words_[i] + "' (see kimi-cpp help)");
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
