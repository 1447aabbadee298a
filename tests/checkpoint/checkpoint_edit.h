// Test helpers that change a checkpoint directory on disk: quantize it, edit its config.json,
// rewrite its single safetensors file (drop, reshape, retype or add tensors), and expect a
// load error naming something.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"

namespace kimi::test {

// A quantized copy (kimi-cpp quantize --targets T) of the checkpoint in a temp dir.
std::string quantized(const std::string& src, const std::string& targets = "experts");

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit);

// KimiModel::load(dir) must throw a kimi::Error whose message contains `needle`.
void expect_load_error(const std::string& dir, const std::string& needle);

// Rewrites a checkpoint's single file: `keep` decides each tensor's fate (and may change its
// entry; bytes past the old ones read 0), `extra` adds tensors with their bytes.
using ExtraTensors = std::vector<std::pair<SafetensorsWriter::Entry, std::vector<uint8_t>>>;
void rewrite_tensors(const std::string& dir, const std::function<bool(SafetensorsWriter::Entry&)>& keep,
                     const ExtraTensors& extra = {});

}   // namespace kimi::test
