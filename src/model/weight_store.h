// WeightStore: every tensor of a Hugging Face model directory (one model.safetensors, or
// the shards listed in model.safetensors.index.json), by name: memory-mapped, or read once
// into huge pages (WeightMemory; the default picks huge pages when the kernel has them and
// the files fit in available memory). It also owns
// the few buffers made by load-time preparation (f32 copies of small vectors, -exp(A_log),
// the transposed k part of kv_b_proj), so every prepared tensor lives as long as the model.
// A multimodal checkpoint (Kimi-K3) keeps the text model under a name prefix: select_prefix
// then sets every other tensor (vision tower, projector) aside unread, and names are given
// without the prefix.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/quant_config.h"
#include "model/safetensors.h"

namespace kimi {

// How the checkpoint's bytes are held (--mmap / --no-mmap; see MappedFile).
enum class WeightMemory : uint8_t {
    kAuto,   // huge-page copy when huge_pages_available() and the files fit in 3/4 of MemAvailable, else mmap
    kMmap,
    kCopy,
    kMmapLazy,   // mapped, pages read when first touched: one streaming pass over a checkpoint larger than RAM
};

class WeightStore {
public:
    // throws kimi::Error; on_read(done, total) reports the bytes read so far (copy only).
    explicit WeightStore(const std::string& model_dir, WeightMemory memory = WeightMemory::kAuto,
                         const std::function<void(uint64_t, uint64_t)>& on_read = {});
    FileMemory file_memory() const { return file_memory_; }   // what kAuto resolved to

    // The tensor `name`, checked: present, float class (F32/BF16/F16), exactly `shape`.
    // Marks it used; finish() then rejects any tensor of the checkpoint never asked for.
    Tensor get(const std::string& name, std::initializer_list<int64_t> shape);
    // The same checks but any shape (the caller checks it, e.g. a padded vector).
    Tensor get_any_shape(const std::string& name);
    // The weight [out, in] of the linear layer `module` (name without ".weight"): `module.weight`
    // as stored, or — when the quantization config (set_quant) quantizes the module — an
    // kMXFP4 tensor over `module.weight_packed` (U8 [out, in/2]) and `module.weight_scale`
    // (U8 [out, in/32]), both checked, read in place.
    // is_linear: false for a weight-holding module that is not a torch.nn.Linear (the router).
    Tensor linear(const std::string& module, int64_t out, int64_t in, bool is_linear = true);
    // As linear(), but a quantized weight is dequantized (exactly) into a store-owned BF16
    // copy: for the few linears read other than by a matrix product (split, transposed, fused).
    Tensor linear_dense(const std::string& module, int64_t out, int64_t in, bool is_linear = true);
    void set_quant(const QuantConfig* q) { quant_ = q; }
    uint64_t mxfp4_bytes() const { return mxfp4_bytes_; }   // packed + scale bytes of MXFP4 linears
    // Every tensor of the checkpoint (full names, as stored), in name order — for tools that
    // rewrite a checkpoint (quantize).
    std::vector<std::pair<std::string, Tensor>> all_tensors() const;
    // Keeps only the tensors named `prefix`…; the others are skipped (counted, never read).
    void select_prefix(const std::string& prefix);
    size_t n_skipped() const { return n_skipped_; }
    uint64_t skipped_bytes() const { return skipped_bytes_; }
    void finish() const;   // throws if unused (unexpected) tensors remain

    // Load-time preparation buffers, owned by the store.
    Tensor new_f32(std::initializer_list<int64_t> shape);
    Tensor new_like(DType t, std::initializer_list<int64_t> shape);
    Tensor to_f32(const Tensor& t, std::initializer_list<int64_t> shape);   // exact widening copy

    size_t n_files() const { return files_.size(); }
    uint64_t tensor_bytes() const;   // bytes of all checkpoint tensors
    uint64_t bytes_used() const { return bytes_used_; }   // bytes of the tensors checked so far
    int64_t n_params() const;        // elements of all checkpoint tensors

private:
    struct Entry {
        Tensor tensor;
        const SafetensorsFile* file;
    };
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    FileMemory file_memory_ = FileMemory::kMap;
    const Entry& find(const std::string& name, const std::string& expected_shape, bool bytes = false);
    Tensor get_u8(const std::string& name, int64_t rows, int64_t cols);
    const QuantConfig* quant_ = nullptr;
    uint64_t mxfp4_bytes_ = 0;
    std::map<std::string, Entry> tensors_;
    std::string prefix_;
    size_t n_skipped_ = 0;
    uint64_t skipped_bytes_ = 0;
    std::set<std::string> used_;
    std::vector<std::unique_ptr<unsigned char[]>> owned_;
    uint64_t bytes_used_ = 0;
};

}  // namespace kimi
