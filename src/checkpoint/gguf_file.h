// GGUF reader (llama.cpp's model file format, v2 and v3, little-endian): the header, the
// metadata key/values, the tensor infos and the aligned data section, memory-mapped or read
// into huge pages (MappedFile). Every count, length, offset and size is checked against the
// file before it is used, so a corrupt or truncated file is a one-line kimi::Error naming the
// file and the key or tensor, never a crash (fuzzed: fuzz/fuzz_gguf.cpp).
// Split models (`name-00001-of-00003.gguf`, llama.cpp's gguf-split) are read from the first
// part: GgufModel opens every part and checks split.no / split.count / split.tensors.count.
// ref: docs/gguf.md; llama.cpp ggml/src/gguf.cpp and gguf-py/gguf/gguf_reader.py.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace kimi {

// GGUF metadata value types (gguf_type), as numbered in the file.
enum class GgufType : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
};
const char* gguf_type_name(GgufType t);   // "u8", ..., "string", "array"

// One metadata value. Scalars: integers in `i` (signed types) or `u` (unsigned and bool),
// floats in `f`, strings in `s`. Arrays: `elem` is the element type and `count` the length;
// string arrays are in `strings`, numeric arrays stay in the file (`raw`, little-endian,
// count × element size bytes; read them with the accessors of GgufFile).
struct GgufValue {
    GgufType type = GgufType::kU8;
    GgufType elem = GgufType::kU8;   // arrays only
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0.0;
    std::string s;
    uint64_t count = 0;
    std::vector<std::string> strings;
    const unsigned char* raw = nullptr;
};

// One tensor info. `ne` is in ggml's order (ne[0] the innermost, contiguous dimension);
// tensor() gives the PyTorch-order view (shape = ne reversed) over the mapped bytes.
struct GgufTensorInfo {
    std::string name;
    uint32_t ggml_type = 0;   // as in the file (ggml_type)
    bool supported = false;   // kimi.cpp has a DType for it (`dtype` valid)
    DType dtype = DType::kF32;
    std::vector<int64_t> ne;               // 1..4 dims, ggml order
    uint64_t offset = 0;                   // from the start of the data section
    uint64_t nbytes = 0;                   // ne[0]/block × bytes per block × the other dims
    const unsigned char* data = nullptr;   // the first byte, in the mapped file
    // The tensor as a kimi::Tensor; throws kimi::Error naming the tensor and its type when
    // the type is not supported.
    Tensor tensor() const;
};

// ggml type names and block geometry for every type ggml defines ("Q4_K", "IQ2_XXS", ...;
// "type 99" for an unknown id). ggml_type_block: {elements, bytes} per block; false for an
// unknown id.
std::string ggml_type_name(uint32_t ggml_type);
bool ggml_type_block(uint32_t ggml_type, BlockShape& out);
// The DType for a ggml type kimi.cpp reads (F32, F16, BF16 and the block types of DType);
// false otherwise.
bool ggml_type_dtype(uint32_t ggml_type, DType& out);

// The parsed contents of one GGUF file image (no ownership of the bytes).
struct GgufContents {
    uint32_t version = 0;
    uint64_t alignment = 32;    // general.alignment, or 32
    uint64_t data_offset = 0;   // the data section's first byte, from the start of the file
    std::map<std::string, GgufValue> metadata;
    std::vector<GgufTensorInfo> tensors;   // in file order
};

// Parses and validates a whole GGUF file image (`data`, `size` bytes); `path` names it in
// errors. Throws kimi::Error. For tests and fuzzing, and used by GgufFile.
GgufContents parse_gguf(const unsigned char* data, size_t size, const std::string& path);

class GgufFile {
public:
    // throws kimi::Error; mode/on_read: see MappedFile
    explicit GgufFile(const std::string& path, FileMemory mode = FileMemory::kMap,
                      const std::function<void(uint64_t)>& on_read = {});

    const std::string& path() const { return file_->path(); }
    uint64_t size() const { return file_->size(); }
    const GgufContents& contents() const { return c_; }
    const std::map<std::string, GgufValue>& metadata() const { return c_.metadata; }
    const std::vector<GgufTensorInfo>& tensors() const { return c_.tensors; }

    // Metadata lookups. find: nullptr when absent. The typed getters throw kimi::Error naming
    // the file and the key when it is absent or of another type; integers accept any integer
    // type whose value fits, floats accept f32/f64.
    const GgufValue* find(const std::string& key) const;
    bool has(const std::string& key) const { return find(key) != nullptr; }
    int64_t get_int(const std::string& key) const;
    double get_float(const std::string& key) const;
    bool get_bool(const std::string& key) const;
    const std::string& get_string(const std::string& key) const;
    std::vector<int64_t> get_int_array(const std::string& key) const;    // any integer element type
    std::vector<double> get_float_array(const std::string& key) const;   // f32/f64 elements
    const std::vector<std::string>& get_string_array(const std::string& key) const;

private:
    std::unique_ptr<MappedFile> file_;
    GgufContents c_;
};

// The paths of a split model's parts, given its first part (`…-00001-of-0000N.gguf`: parts 1..N
// by the same naming), or {path} for a file not named as a split.
std::vector<std::string> gguf_split_paths(const std::string& first);

// A whole model: one GGUF file, or every part of a split one (metadata from the first part;
// each part's split.no / split.count checked, split.tensors.count equal to the tensors found,
// no tensor name twice).
class GgufModel {
public:
    explicit GgufModel(const std::string& path, FileMemory mode = FileMemory::kMap,
                       const std::function<void(uint64_t, uint64_t)>& on_read = {});   // (done, total) bytes

    const GgufFile& first() const { return *parts_.front(); }
    const std::vector<std::unique_ptr<GgufFile>>& parts() const { return parts_; }
    // Every tensor of every part, by name (the part that holds it as well).
    struct Entry {
        const GgufTensorInfo* info;
        const GgufFile* part;
    };
    const std::map<std::string, Entry>& tensors() const { return tensors_; }
    uint64_t total_bytes() const;   // the sizes of all parts

private:
    std::vector<std::unique_ptr<GgufFile>> parts_;
    std::map<std::string, Entry> tensors_;
};

// Whether `path` names a GGUF file (ends in .gguf, or starts with the magic "GGUF").
bool is_gguf_path(const std::string& path);

}   // namespace kimi
