// Safetensors reader: an 8-byte little-endian header length, a JSON header (name →
// {dtype, shape, data_offsets}), then the raw data. Tensors are views of the file's bytes. Every header is validated before use: size limits, dtypes,
// shape × dtype = byte length, offsets inside the file, no overlaps. Errors name the file
// and the tensor. (Tested in tests/checkpoint, fuzzed in fuzz/.) The bytes can also be read into huge pages (MappedFile).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace kimi {

class SafetensorsFile {
public:
    static constexpr uint64_t kMaxHeaderBytes = 100u << 20;   // 100 MiB, as the reference library

    // throws kimi::Error; mode/on_read: see MappedFile
    explicit SafetensorsFile(const std::string& path, FileMemory mode = FileMemory::kMap,
                             const std::function<void(uint64_t)>& on_read = {});

    const std::string& path() const { return file_->path(); }
    const std::map<std::string, Tensor>& tensors() const { return tensors_; }

private:
    std::unique_ptr<MappedFile> file_;
    std::map<std::string, Tensor> tensors_;
};

// Parses a header without a file, for tests and fuzzing: `data`/`size` is the whole file.
std::map<std::string, Tensor> parse_safetensors(const unsigned char* data, size_t size, const std::string& path);

}   // namespace kimi
