// JSON from a request parsed in time linear in its size. nlohmann's DOM parser inserts each key of an
// ordered_json object with a linear search for it (ordered_map), so an object of n keys costs
// O(n²): 200,000 keys (2.3 MB) took 32 s. This SAX builder appends keys and finds duplicates
// through a hash set per open object; the result is the same ordered_json (key order as
// written; a repeated key keeps its first place and takes its last value, as nlohmann does).
#pragma once
#include <string_view>

#include <nlohmann/json.hpp>

namespace kimi {

// Throws nlohmann::json::parse_error for malformed text.
nlohmann::ordered_json parse_json_linear(std::string_view text);

}   // namespace kimi
