// JSONL reading (jsonl.h).
#include "bench/jsonl.h"

#include <fstream>

#include "core/error.h"

namespace kimi::bench {

std::vector<JsonLine> read_jsonl(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw Error(path + ": cannot open");
    std::vector<JsonLine> out;
    std::string line;
    for (int64_t n = 1; std::getline(f, line); ++n) {
        const size_t first = line.find_first_not_of(" \t\r\n");
        if (first == std::string::npos || line[first] == '#') continue;
        JsonLine j;
        j.line = n;
        j.where = path + ":" + std::to_string(n);
        try {
            j.value = nlohmann::ordered_json::parse(line);
        } catch (const std::exception& e) {
            throw Error(j.where + ": not JSON: " + e.what());
        }
        out.push_back(std::move(j));
    }
    return out;
}

}   // namespace kimi::bench
