// JSONL files of the measuring commands (evaluation sets, samples): one JSON value a line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::bench {

struct JsonLine {
    int64_t line = 0;    // 1-based
    std::string where;   // "path:line", for errors about this value
    nlohmann::ordered_json value;
};

// Every line parsed but blank ones and '#' comments; throws kimi::Error "path: cannot open" or
// "path:line: not JSON: …".
std::vector<JsonLine> read_jsonl(const std::string& path);

}   // namespace kimi::bench
