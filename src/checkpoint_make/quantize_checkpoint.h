// quantize_checkpoint: an MXFP4 (compressed-tensors `mxfp4-pack-quantized`) copy of a Hugging
// Face checkpoint directory — the work behind `kimi-cpp quantize`. The targeted linears become
// X.weight_packed + X.weight_scale (the rounding rule of mxfp4_quantize.h), every other tensor
// is copied byte for byte, config.json gets the quantization_config a published MXFP4
// checkpoint carries (targets ["Linear"], every linear left as stored listed in `ignore`), the
// output is sharded (≤ max_shard_bytes, with an index when more than one file), and every other
// file of the input (tokenizer, generation config, …) is copied. Streams tensor by tensor from
// the memory-mapped input, so a checkpoint larger than RAM works.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kimi {

struct QuantizeOptions {
    std::string targets = "experts";   // experts | experts+shared | all-linear
    int threads = 1;
    uint64_t max_shard_bytes = 5000000000ull;
    std::function<void(uint64_t done, uint64_t total)> progress;   // bytes written
};

struct QuantizeReport {
    std::vector<std::string> quantized, ignored;   // linear module names
    std::vector<std::string> notices;              // targeted linears left as stored, and why
    uint64_t bytes_in = 0, bytes_out = 0;
};

// Throws kimi::Error (input already quantized, nothing targeted, output not empty, I/O).
QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir, const QuantizeOptions& opts);

}   // namespace kimi
