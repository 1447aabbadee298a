// SafetensorsWriter: writes a .safetensors file tensor by tensor (header first, with the
// data offsets of every tensor, padded to 8 bytes), streaming the data so multi-GB
// checkpoints never need to be held in memory.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace kimi {

class SafetensorsWriter {
public:
    struct Entry {
        std::string name;
        DType dtype;
        std::vector<int64_t> shape;
        uint64_t numel() const;
    };
    // Fills `n` elements starting at element `offset` of the tensor into `out` (of the dtype).
    using Filler = std::function<void(const Entry&, uint64_t offset, uint64_t n, void* out)>;

    // Writes all entries (sorted by name, as the format's reference writer does). Throws kimi::Error.
    static void write(const std::string& path, std::vector<Entry> entries, const Filler& fill);

    // A checkpoint in `dir`: one model.safetensors when max_shard_bytes is 0 or everything
    // fits, else model-0000i-of-0000N.safetensors shards of at most max_shard_bytes each (a
    // larger tensor gets a shard of its own), in name order, plus model.safetensors.index.json
    // (metadata.total_size, weight_map) as Hugging Face writes it.
    static void write_checkpoint(const std::string& dir, std::vector<Entry> entries, const Filler& fill,
                                 uint64_t max_shard_bytes);
};

}   // namespace kimi
