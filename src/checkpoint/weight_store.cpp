// WeightStore implementation: single-file and sharded (index.json) checkpoints.
#include "checkpoint/weight_store.h"

#include <algorithm>
#include <utility>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kimi {

namespace {
bool file_exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}
}   // namespace

namespace {
uint64_t file_size(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

// A checkpoint that does not fit in memory is mapped without MAP_POPULATE: populating it would
// read the whole file through the page cache at load (evicting its own first pages), and the
// pages a step uses are faulted in from the file anyway; the page cache then keeps the ones
// decode keeps touching (docs/performance.md, "Larger than memory").
}   // namespace

FileMemory resolve_file_memory(WeightMemory m, uint64_t total_bytes, uint64_t available, bool huge_pages) {
    if (m == WeightMemory::kMmapLazy) return FileMemory::kMapLazy;
    if (m == WeightMemory::kCopy) return FileMemory::kHugeCopy;
    const bool fits = total_bytes <= available / 4 * 3;
    if (m == WeightMemory::kMmap || !fits) return fits ? FileMemory::kMap : FileMemory::kMapLazy;
    return huge_pages ? FileMemory::kHugeCopy : FileMemory::kMap;
}

WeightStore::WeightStore(const std::string& model_dir, WeightMemory memory,
                         const std::function<void(uint64_t, uint64_t)>& on_read, const std::vector<GgufSource>* gguf) {
    if (is_gguf_path(model_dir)) {
        KIMI_CHECK(gguf, "WeightStore: a GGUF file needs its tensor layout's GGUF sources");
        load_gguf(model_dir, memory, on_read, *gguf);
        return;
    }
    const std::string index_path = model_dir + "/model.safetensors.index.json";
    std::map<std::string, std::string> expected_file;   // tensor → shard (sharded checkpoints)
    std::vector<std::string> paths;
    if (file_exists(index_path)) {
        check_regular_file(index_path);
        std::ifstream f(index_path);
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(f);
        } catch (const nlohmann::json::exception& e) {
            throw Error(index_path + ": invalid JSON: " + e.what());
        }
        if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            throw Error(index_path + ": missing object 'weight_map'");
        std::set<std::string> shards;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it.value().is_string())
                throw Error(index_path + ": weight_map['" + it.key() + "'] must be a file name");
            const std::string shard = it.value().get<std::string>();
            if (shard.empty() || shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
                throw Error(index_path + ": weight_map['" + it.key() + "'] names an invalid file '" + shard + "'");
            expected_file[it.key()] = shard;
            shards.insert(shard);
        }
        for (const auto& s : shards) paths.push_back(model_dir + "/" + s);
    } else if (file_exists(model_dir + "/model.safetensors")) {
        paths.push_back(model_dir + "/model.safetensors");
    } else {
        throw Error(model_dir + ": no model.safetensors or model.safetensors.index.json");
    }
    uint64_t total = 0, done = 0;
    for (const auto& p : paths) total += file_size(p);
    file_memory_ = resolve_file_memory(memory, total, memory_available_bytes(), huge_pages_available());
    const auto on_bytes = [&](uint64_t n) {
        done += n;
        if (on_read) on_read(done, total);
    };
    for (const auto& p : paths) files_.push_back(std::make_unique<SafetensorsFile>(p, file_memory_, on_bytes));
    for (const auto& f : files_) {
        for (const auto& [name, t] : f->tensors()) {
            if (tensors_.count(name))
                throw Error(f->path() + ": tensor '" + name + "' also appears in " + *tensors_[name].path);
            if (!expected_file.empty()) {
                auto it = expected_file.find(name);
                if (it == expected_file.end())
                    throw Error(f->path() + ": tensor '" + name + "' is not listed in " + index_path);
                if (model_dir + "/" + it->second != f->path())
                    throw Error(f->path() + ": tensor '" + name + "' is listed under " + it->second + " in the index");
            }
            tensors_[name] = Entry{t, &f->path()};
        }
    }
    for (const auto& [name, shard] : expected_file)
        if (!tensors_.count(name))
            throw Error(model_dir + "/" + shard + ": tensor '" + name + "' listed in the index is missing");
}

void WeightStore::select_prefix(const std::string& prefix, const std::vector<std::string>& top_level) {
    prefix_ = prefix;
    const auto under = [](const std::string& name, const std::string& p) { return name.compare(0, p.size(), p) == 0; };
    for (auto it = tensors_.begin(); it != tensors_.end();) {
        if (under(it->first, prefix) || std::any_of(top_level.begin(), top_level.end(), [&](const std::string& p) {
                return under(it->first, p);
            })) {
            ++it;
            continue;
        }
        ++n_skipped_;
        skipped_bytes_ += it->second.tensor.nbytes();
        it = tensors_.erase(it);
    }
}

const WeightStore::Entry& WeightStore::find(const std::string& name, const std::string& expected_shape, bool bytes) {
    const std::string full = prefix_ + name;
    auto it = tensors_.find(full);
    if (it == tensors_.end()) throw Error("missing tensor '" + full + "' (expected shape " + expected_shape + ")");
    const Tensor& t = it->second.tensor;
    if (bytes && t.dtype != DType::kU8)
        throw Error(*it->second.path + ": tensor '" + full + "': dtype " + dtype_name(t.dtype) +
                    ", expected U8 (MXFP4)");
    if (!bytes && t.dtype != DType::kF32 && t.dtype != DType::kBF16 && t.dtype != DType::kF16 &&
        !is_block_quant(t.dtype))
        throw Error(
            *it->second.path + ": tensor '" + full + "': dtype " + dtype_name(t.dtype) +
            " is not a float type (F32, BF16, F16)" +
            (t.dtype == DType::kU8 ? " — a quantized tensor the config's quantization_config does not declare" : ""));
    if (used_.insert(full).second) {
        bytes_used_ += t.nbytes();
        if (check_weights_) check_sample(full, it->second);
    }
    return it->second;
}

// A sample: the first 64 elements and 64 spread evenly (a few pages of a mapped file; a
// checkpoint written with NaN or Inf weights shows them everywhere).
void WeightStore::check_sample(const std::string& name, const Entry& e) const {
    const Tensor& t = e.tensor;
    const int64_t n = t.numel(), step = std::max<int64_t>(1, n / 64);
    const bool scales =
        t.dtype == DType::kU8 && name.size() > 13 && name.compare(name.size() - 13, 13, ".weight_scale") == 0;
    const bool floats =
        t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kF16 || is_block_quant(t.dtype);
    if (!scales && !floats) return;
    for (int64_t i = 0; i < n; i = i < 64 ? i + 1 : i + step) {
        const bool bad = scales ? static_cast<const uint8_t*>(t.data)[i] == 255 : !std::isfinite(element_f32(t, i));
        if (bad)
            throw Error(*e.path + ": tensor '" + name + "' holds " +
                        (scales ? "the NaN scale byte 255" : "a NaN or Inf value") + " (element " + std::to_string(i) +
                        "); --skip-weight-check loads it anyway");
    }
}

Tensor WeightStore::get(const std::string& name, std::span<const int64_t> shape) {
    KIMI_CHECK(shape.size() <= 4, "rank > 4");
    Tensor want;
    for (int64_t v : shape) want.shape[size_t(want.rank++)] = v;
    const Entry& e = find(name, shape_str(want));
    if (want.rank != e.tensor.rank || want.shape != e.tensor.shape)
        throw Error(*e.path + ": tensor '" + prefix_ + name + "': shape " + shape_str(e.tensor) + ", expected " +
                    shape_str(want));
    return e.tensor;
}

Tensor WeightStore::get_top_level(const std::string& full_name, std::span<const int64_t> shape) {
    const std::string saved = std::exchange(prefix_, std::string());
    try {
        Tensor t = get(full_name, shape);
        prefix_ = saved;
        return t;
    } catch (...) {
        prefix_ = saved;
        throw;
    }
}

Tensor WeightStore::get_any_shape(const std::string& name) { return find(name, "any").tensor; }

Tensor WeightStore::get_u8(const std::string& name, int64_t rows, int64_t cols) {
    const std::string want = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
    const Entry& e = find(name, want + " U8", true);
    if (e.tensor.rank != 2 || e.tensor.dim(0) != rows || e.tensor.dim(1) != cols)
        throw Error(*e.path + ": tensor '" + prefix_ + name + "': shape " + shape_str(e.tensor) + ", expected " + want);
    return e.tensor;
}

Tensor WeightStore::linear(const std::string& module, int64_t out, int64_t in) {
    const std::string full = prefix_ + module;
    const bool packed = has(module + ".weight_packed"), dense = has(module + ".weight");
    if (packed && dense)
        throw Error("module '" + full + "' is stored twice: both '" + full + ".weight' (dense) and '" + full +
                    ".weight_packed' (MXFP4) are present");
    if (!packed) {
        if (dense && quant_ && quant_->quantizes(full)) ++dense_but_targeted_[module_kind(module)];
        const int64_t shape[2] = {out, in};
        return get(module + ".weight", shape);
    }
    if (!quant_ || !quant_->quantizes(full))
        throw Error("tensor '" + full +
                    ".weight_packed' is stored as MXFP4, but the config does not quantize module '" + full +
                    "': " + (quant_ ? quant_->why_not(full) : QuantConfig{}.why_not(full)));
    if (in % kMxfp4Group != 0)
        throw Error("linear '" + full + "' is stored as MXFP4, but its input width " + std::to_string(in) +
                    " is not a multiple of 32");
    const Tensor q = get_u8(module + ".weight_packed", out, in / 2);
    const Tensor scale = get_u8(module + ".weight_scale", out, in / kMxfp4Group);
    Tensor t(q.data, DType::kMXFP4, {out, in});
    t.scale = static_cast<const uint8_t*>(scale.data);
    mxfp4_bytes_ += q.nbytes() + scale.nbytes();
    ++mxfp4_linears_[module_kind(module)];
    return t;
}

Tensor WeightStore::linear_dense(const std::string& module, int64_t out, int64_t in) {
    const Tensor w = linear(module, out, in);
    if (w.dtype != DType::kMXFP4) return w;
    Tensor t = new_like(DType::kBF16, {out, in});
    auto* dst = static_cast<uint16_t*>(t.data);
    for (int64_t i = 0; i < out * in; ++i) dst[i] = f32_to_bf16(element_f32(w, i));   // exact: MXFP4 values fit bf16
    return t;
}

std::string module_kind(const std::string& module) {
    const auto ends = [&](const char* suf) {
        const size_t n = std::strlen(suf);
        return module.size() >= n && module.compare(module.size() - n, n, suf) == 0;
    };
    const auto has = [&](const char* part) { return module.find(part) != std::string::npos; };
    if (has(".experts.")) return "routed experts";
    if (has("shared_experts.")) return "shared experts";
    if (ends("block_sparse_moe.gate")) return "routers";
    if (has("routed_expert_")) return "latent projections";
    if (ends("_res_proj")) return "AttnRes vectors";
    if (has("self_attn.")) return "attention projections";
    if (has("lm_head")) return "lm_head";
    return "dense MLP projections";
}

void WeightStore::finish() const {
    for (const auto& [name, e] : tensors_)
        if (!used_.count(name))
            throw Error(*e.path + ": unexpected tensor '" + name + "' (not part of this architecture/config)");
}

Tensor WeightStore::new_like(DType dt, std::initializer_list<int64_t> shape) {
    Tensor t(nullptr, dt, shape);
    owned_.emplace_back(new unsigned char[t.nbytes() + 64]());
    t.data = owned_.back().get();
    return t;
}

Tensor WeightStore::new_f32(std::initializer_list<int64_t> shape) { return new_like(DType::kF32, shape); }

Tensor WeightStore::to_f32(const Tensor& src) {
    Tensor t = src;
    t.dtype = DType::kF32;
    owned_.emplace_back(new unsigned char[t.nbytes() + 64]());
    t.data = owned_.back().get();
    t.scale = nullptr;
    decode_f32(src, t.f32());
    return t;
}

std::vector<std::pair<std::string, Tensor>> WeightStore::all_tensors() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [name, e] : tensors_) out.emplace_back(name, e.tensor);
    return out;
}

uint64_t WeightStore::tensor_bytes() const {
    uint64_t n = 0;
    for (const auto& [name, e] : tensors_) n += e.tensor.nbytes();
    return n;
}

}   // namespace kimi
