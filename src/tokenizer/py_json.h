// JSON text exactly as Python's json.dumps(..., ensure_ascii=False) writes it (the `tojson`
// filter of HF chat templates): key order as given or sorted, compact (',', ':') or default
// (', ', ': ') separators, Python float repr.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kimi::tok {

std::string py_json_dumps(const nlohmann::ordered_json& v, bool compact, bool sort_keys);
std::string py_float_repr(double v);

}   // namespace kimi::tok
