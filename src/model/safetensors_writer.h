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
};

}  // namespace kimi
