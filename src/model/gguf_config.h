// A GGUF model's metadata (llama.cpp's `kimi-linear` and `kimi-k3` keys, as its converter
// writes them) turned back into the config.json object the architecture publishes, so one
// parser (parse_model_config) validates both kinds of checkpoint. What GGUF does not carry is
// read from the tensors (the KDA head count from ssm_beta, the gates from which tensors exist)
// or is an error naming what is missing.
// ref: docs/gguf.md#config; llama.cpp conversion/kimi_linear.py and kimi_k3.py (set_gguf_parameters).
#pragma once
#include <nlohmann/json.hpp>

#include "checkpoint/gguf_file.h"

namespace kimi {

// Throws kimi::Error naming the file and the key.
nlohmann::json gguf_model_config_json(const GgufModel& g);

}   // namespace kimi
