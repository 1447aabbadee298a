// WeightStore: every tensor of a Hugging Face model directory (one model.safetensors, or
// the shards listed in model.safetensors.index.json), or of a GGUF file (or split GGUF, by
// its first part) seen under the Hugging Face names (weight_store_gguf.cpp undoes what
// llama.cpp's converter changed), by name: memory-mapped, or read once
// into huge pages (WeightMemory; the default picks huge pages when the kernel has them and
// the files fit in available memory). It also owns
// the few buffers made by load-time preparation (f32 copies of small vectors, -exp(A_log),
// the transposed k part of kv_b_proj), so every prepared tensor lives as long as the model.
// A multimodal checkpoint (Kimi-K3) keeps the text model under a name prefix: select_prefix
// then sets every other tensor aside unread (the vision tower and projector too, unless they
// are kept as top-level tensors), and names are given without the prefix.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/gguf_file.h"
#include "checkpoint/gguf_names.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/safetensors.h"

namespace kimi {

// How the checkpoint's bytes are held (--mmap / --no-mmap; see MappedFile).
enum class WeightMemory : uint8_t {
    kAuto,   // huge-page copy when huge_pages_available() and the files fit in 3/4 of the memory
             // available (MemAvailable, or the memory cgroup's room), else mmap
    kMmap,   // mapped and populated at load; lazily when the files do not fit (as kMmapLazy)
    kCopy,
    kMmapLazy,   // mapped, pages read when first touched: one streaming pass over a checkpoint larger than RAM
};

// What a WeightMemory request resolves to for `total_bytes` of checkpoint files, with
// `available` bytes of memory (memory_available_bytes()) and transparent huge pages or not:
// a checkpoint over 3/4 of the memory is always mapped lazily (never populated at load).
FileMemory resolve_file_memory(WeightMemory m, uint64_t total_bytes, uint64_t available, bool huge_pages);

// The kind of a linear module, by its name, for reports: "routed experts", "shared experts",
// "routers", "latent projections", "AttnRes vectors", "attention projections",
// "dense MLP projections", "lm_head".
std::string module_kind(const std::string& module);

class WeightStore {
public:
    // throws kimi::Error; on_read(done, total) reports the bytes read so far (copy only).
    // gguf: where each tensor of a GGUF file comes from (TensorLayout::gguf_sources()); a GGUF
    // file is refused without it.
    explicit WeightStore(const std::string& model_dir, WeightMemory memory = WeightMemory::kAuto,
                         const std::function<void(uint64_t, uint64_t)>& on_read = {},
                         const std::vector<GgufSource>* gguf = nullptr);
    FileMemory file_memory() const { return file_memory_; }   // what kAuto resolved to

    // Whether the KDA `A_log` tensors hold -exp(A_log) already (a GGUF: llama.cpp's converter
    // folds it; the loader then takes the values as they are).
    bool a_log_folded() const { return a_log_folded_; }
    bool is_gguf() const { return gguf_ != nullptr; }
    const GgufModel* gguf() const { return gguf_.get(); }

    // The tensor `name`, checked: present, float class (F32/BF16/F16, or a GGUF block type),
    // exactly `shape`.
    // Marks it used; finish() then rejects any tensor of the checkpoint never asked for.
    Tensor get(const std::string& name, std::span<const int64_t> shape);
    // The same checks but any shape (the caller checks it, e.g. a padded vector).
    Tensor get_any_shape(const std::string& name);
    // The weight [out, in] of the linear layer `module` (name without ".weight"), in the form
    // the checkpoint stores it: `module.weight` (dense), or `module.weight_packed` (U8
    // [out, in/2]) + `module.weight_scale` (U8 [out, in/32]) read in place as a kMXFP4 tensor.
    // The quantization config (set_quant) cross-checks: a packed module it does not quantize,
    // or both forms at once, is an error; a dense module it would quantize is accepted and
    // counted (dense_but_targeted).
    Tensor linear(const std::string& module, int64_t out, int64_t in);
    // As linear(), but a quantized weight is dequantized (exactly) into a store-owned BF16
    // copy: for the few linears read other than by a matrix product (split, transposed, fused).
    Tensor linear_dense(const std::string& module, int64_t out, int64_t in);
    void set_quant(const QuantConfig* q) { quant_ = q; }
    // Whether each tensor, when first asked for, is checked on a sample for NaN/Inf (float
    // types) or the NaN scale byte 255 (MXFP4 scales): on by default; --skip-weight-check.
    void set_check_weights(bool on) { check_weights_ = on; }
    uint64_t mxfp4_bytes() const { return mxfp4_bytes_; }   // packed + scale bytes of MXFP4 linears
    // Linears read so far, by kind (module_kind): stored MXFP4, and stored dense although the
    // config would quantize them (e.g. {"routers", 92}, {"latent projections", 184}).
    const std::map<std::string, int64_t>& mxfp4_linears() const { return mxfp4_linears_; }
    const std::map<std::string, int64_t>& dense_but_targeted() const { return dense_but_targeted_; }
    // Every tensor of the checkpoint (full names, as stored), in name order — for tools that
    // rewrite a checkpoint (quantize).
    std::vector<std::pair<std::string, Tensor>> all_tensors() const;
    // Keeps only the tensors named `prefix`… and those under the `top_level` prefixes (the K3
    // vision tower and projector, asked for by get_top_level); the others are skipped (counted,
    // never read).
    void select_prefix(const std::string& prefix, const std::vector<std::string>& top_level = {});
    // A kept tensor outside the prefix, by its full name (the same checks as get).
    Tensor get_top_level(const std::string& full_name, std::span<const int64_t> shape);
    bool has_top_level(const std::string& full_name) const { return tensors_.count(full_name) > 0; }
    size_t n_skipped() const { return n_skipped_; }
    uint64_t skipped_bytes() const { return skipped_bytes_; }
    void finish() const;   // throws if unused (unexpected) tensors remain

    // Load-time preparation buffers, owned by the store.
    Tensor new_f32(std::initializer_list<int64_t> shape);
    Tensor new_like(DType t, std::initializer_list<int64_t> shape);
    Tensor to_f32(const Tensor& t);   // exact widening (or block decoding) copy, same shape

    size_t n_files() const { return gguf_ ? gguf_->parts().size() : files_.size(); }
    uint64_t tensor_bytes() const;                        // bytes of all checkpoint tensors
    uint64_t bytes_used() const { return bytes_used_; }   // bytes of the tensors checked so far

private:
    struct Entry {
        Tensor tensor;
        const std::string* path;   // the file that holds it (errors)
    };
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::unique_ptr<GgufModel> gguf_;
    bool a_log_folded_ = false;
    // weight_store_gguf.cpp: the GGUF's tensors under their Hugging Face names, MLA's kv_b_proj
    // rebuilt from its k_b / v_b halves.
    void load_gguf(const std::string& path, WeightMemory memory, const std::function<void(uint64_t, uint64_t)>& on_read,
                   const std::vector<GgufSource>& sources);
    void join_kv_b_halves(const std::vector<GgufSource>& sources);
    Tensor join_kv_b(const Tensor& k_b, const Tensor& v_b, const std::string& where);
    FileMemory file_memory_ = FileMemory::kMap;
    const Entry& find(const std::string& name, const std::string& expected_shape, bool bytes = false);
    Tensor get_u8(const std::string& name, int64_t rows, int64_t cols);
    bool has(const std::string& name) const { return tensors_.count(prefix_ + name) > 0; }
    void check_sample(const std::string& name, const Entry& e) const;
    bool check_weights_ = true;
    const QuantConfig* quant_ = nullptr;
    uint64_t mxfp4_bytes_ = 0;
    std::map<std::string, int64_t> mxfp4_linears_, dense_but_targeted_;
    std::map<std::string, Entry> tensors_;
    std::string prefix_;
    size_t n_skipped_ = 0;
    uint64_t skipped_bytes_ = 0;
    std::set<std::string> used_;
    std::vector<std::unique_ptr<unsigned char[]>> owned_;
    uint64_t bytes_used_ = 0;
};

}   // namespace kimi
