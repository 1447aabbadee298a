// text_io.h implementation.
#include "text_io.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kimi::app {

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open " + path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_out(const std::string& s) {
    if (!s.empty() && std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) throw Error("cannot write to stdout");
    std::fflush(stdout);
}

}   // namespace kimi::app
