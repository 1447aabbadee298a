// quantize_checkpoint (see quantize_checkpoint.h).
// Which linears --targets selects comes from the tensor layout (model/tensor_layout.h).
// ref: compressed-tensors match.py (targets/ignore), vLLM compressed_tensors MXFP4 scheme (layout).
#include "checkpoint_make/quantize_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/tensor_layout.h"
#include "checkpoint/mxfp4_quantize.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/weight_store.h"

namespace kimi {

namespace {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// Whether --targets selects a linear of the given role: the routed experts always, the shared
// experts from experts+shared on, every linear but the router with all-linear.
bool targeted(TensorRole role, const std::string& targets) {
    if (role == TensorRole::kRoutedExpert) return true;
    if (role == TensorRole::kSharedExpert && targets == "experts+shared") return true;
    return targets == "all-linear" && role != TensorRole::kRouter;
}

// The quantization_config of the output: K3's routed experts get the published block verbatim;
// anything else one group targeting "Linear" with every linear left as stored in `ignore`.
ojson quantization_config(const QuantizeReport& plan, bool k3, const std::string& targets) {
    if (k3 && targets == "experts") return published_k3_quant_config();
    ojson ignore = ojson::array();
    for (const auto& m : plan.ignored) ignore.push_back(m);
    if (k3) {   // the vision tower's and projector's linears stay as they are
        ignore.push_back("re:vision_tower.*");
        ignore.push_back("re:mm_projector.*");
    }
    ojson weights = {{"num_bits", 4},
                     {"type", "float"},
                     {"symmetric", true},
                     {"group_size", 32},
                     {"strategy", "group"},
                     {"block_structure", nullptr},
                     {"dynamic", false},
                     {"actorder", nullptr},
                     {"observer", "minmax"},
                     {"observer_kwargs", ojson::object()},
                     {"scale_dtype", "torch.uint8"},
                     {"zp_dtype", nullptr}};
    return {{"quant_method", "compressed-tensors"},
            {"format", "mxfp4-pack-quantized"},
            {"quantization_status", "compressed"},
            {"config_groups",
             {{"group_0",
               {{"format", "mxfp4-pack-quantized"},
                {"targets", ojson::array({"Linear"})},
                {"weights", weights},
                {"input_activations", nullptr},
                {"output_activations", nullptr}}}}},
            {"ignore", ignore},
            {"kv_cache_scheme", nullptr},
            {"global_compression_ratio", nullptr}};
}

// Row-major f32 values of elements [e0, e0 + n) of a float-class tensor.
void read_f32(const Tensor& t, int64_t e0, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = element_f32(t, e0 + i);
}

// The input's config.json as written (to keep every key and its order).
ojson read_config_json(const std::string& in_dir) {
    ojson config;
    std::ifstream f(in_dir + "/config.json");
    if (!f) throw Error(in_dir + "/config.json: cannot open");
    try {
        config = ojson::parse(f);
    } catch (const nlohmann::json::exception& e) {
        throw Error(in_dir + "/config.json: invalid JSON: " + e.what());
    }
    return config;
}

// What the output holds: its entries, each with the input tensor it is made from.
struct OutputPlan {
    QuantizeReport report;   // with bytes_in and bytes_out
    std::vector<SafetensorsWriter::Entry> entries;
    std::map<std::string, Tensor> source;   // output tensor name → the input tensor it comes from
};

// Which linears become MXFP4 (a packed weight and its scales); every other tensor is kept.
OutputPlan plan_output(const std::vector<std::pair<std::string, Tensor>>& tensors, const TensorLayout& layout,
                       const std::string& targets) {
    // The layout row of a stored tensor (vision rows are never quantizable).
    const auto row_of = [&](const std::string& name) -> const TensorRow* {
        if (const TensorRow* v = layout.find(name); v && v->vision) return v;
        if (name.compare(0, layout.prefix().size(), layout.prefix()) != 0) return nullptr;
        return layout.find(name.substr(layout.prefix().size()));
    };
    OutputPlan out;
    QuantizeReport& plan = out.report;
    std::vector<SafetensorsWriter::Entry>& entries = out.entries;
    std::map<std::string, Tensor>& source = out.source;
    uint64_t bytes_in = 0, bytes_out = 0;
    for (const auto& [name, t] : tensors) {
        bytes_in += t.nbytes();
        const TensorRow* row = row_of(name);
        const bool linear = row && row->is_linear();
        if (linear && (t.rank != 2 || t.dim(0) != row->shape[0] || t.dim(1) != row->shape[1]))
            throw Error("quantize: tensor '" + name + "' has shape " + shape_str(t) + ", the config implies [" +
                        std::to_string(row->shape[0]) + ", " + std::to_string(row->shape[1]) + "]");
        const std::string module = linear ? name.substr(0, name.size() - 7) : "";
        if (linear && targeted(row->role, targets) && row->quantizable()) {
            plan.quantized.push_back(module);
            entries.push_back({module + ".weight_packed", DType::kU8, {t.dim(0), t.dim(1) / 2}});
            entries.push_back({module + ".weight_scale", DType::kU8, {t.dim(0), t.dim(1) / kMxfp4Group}});
            source[module + ".weight_packed"] = source[module + ".weight_scale"] = t;
            bytes_out += uint64_t(t.numel() / 2 + t.numel() / kMxfp4Group);
            continue;
        }
        if (linear) {
            plan.ignored.push_back(module);
            if (targeted(row->role, targets))
                plan.notices.push_back(module + ": input width " + std::to_string(t.dim(1)) +
                                       " is not a multiple of 32; left as " + dtype_name(t.dtype));
        }
        entries.push_back({name, t.dtype, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.rank)});
        source[name] = t;
        bytes_out += t.nbytes();
    }
    plan.bytes_in = bytes_in;
    plan.bytes_out = bytes_out;
    return out;
}

// Elements [offset, offset + n) of output entry `e`, made from its input tensor `t`: the bytes of
// a tensor kept as it is, or a quantized linear's packed weights or scales.
void fill_entry(const SafetensorsWriter::Entry& e, const Tensor& t, uint64_t offset, uint64_t n, uint8_t* dst,
                ThreadPool& pool) {
    const bool packed = e.name.size() > 14 && e.name.compare(e.name.size() - 14, 14, ".weight_packed") == 0;
    const bool scales = !packed && e.dtype == DType::kU8 && t.dtype != DType::kU8;
    if (!packed && !scales) {   // a tensor kept as it is: its bytes
        const size_t es = dtype_size(e.dtype);
        std::memcpy(dst, static_cast<const uint8_t*>(t.data) + offset * es, size_t(n) * es);
        return;
    }
    // packed: 16 bytes per group of 32 weights; scales: one byte per group
    const int64_t per_group = packed ? 16 : 1, g0 = int64_t(offset) / per_group, n_groups = int64_t(n) / per_group;
    pool.parallel_ranges(n_groups, [&](int64_t b, int64_t end, int) {
        float w[kMxfp4Group];
        uint8_t q[16], s = 0;
        for (int64_t g = b; g < end; ++g) {
            read_f32(t, (g0 + g) * kMxfp4Group, kMxfp4Group, w);
            mxfp4_quantize_group(w, q, &s);
            if (packed)
                std::memcpy(dst + g * 16, q, 16);
            else
                dst[g] = s;
        }
    });
}

// Every other file of the input (tokenizer, generation config, chat template, …).
void copy_other_files(const std::string& in_dir, const std::string& out_dir) {
    for (const auto& ent : fs::directory_iterator(in_dir)) {
        const std::string fname = ent.path().filename().string();
        const bool weights = fname == "config.json" || fname == "model.safetensors.index.json" ||
            (fname.size() > 12 && fname.compare(fname.size() - 12, 12, ".safetensors") == 0);
        if (ent.is_regular_file() && !weights)
            fs::copy_file(ent.path(), fs::path(out_dir) / fname, fs::copy_options::overwrite_existing);
    }
}

}   // namespace

QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir, const QuantizeOptions& opts) {
    const std::string& targets = opts.targets;
    if (targets != "experts" && targets != "experts+shared" && targets != "all-linear")
        throw Error("quantize: targets must be experts, experts+shared or all-linear, got '" + targets + "'");
    std::error_code ec;
    if (fs::exists(out_dir) && (fs::equivalent(in_dir, out_dir, ec) || !fs::is_empty(out_dir)))
        throw Error("quantize: output " + out_dir + " exists and is not empty (or is the input)");

    // The input: its config as written, validated.
    ojson config = read_config_json(in_dir);
    const ModelConfig mc = load_model_config(in_dir);
    if (mc.quant.mxfp4)
        throw Error("quantize: " + in_dir + " is already quantized (its config has a quantization_config)");
    const WeightStore store(in_dir, WeightMemory::kMmapLazy);   // one pass; the input may exceed RAM
    const auto tensors = store.all_tensors();
    const TensorLayout layout(mc);

    OutputPlan out = plan_output(tensors, layout, targets);
    QuantizeReport& plan = out.report;
    if (plan.quantized.empty())
        throw Error("quantize: no linear layer matches the targets '" + targets + "' (nothing to quantize)");
    fs::create_directories(out_dir);
    ThreadPool pool{opts.threads};
    uint64_t done = 0;
    const auto fill = [&](const SafetensorsWriter::Entry& e, uint64_t offset, uint64_t n, void* dst) {
        fill_entry(e, out.source.at(e.name), offset, n, static_cast<uint8_t*>(dst), pool);
        done += n * dtype_size(e.dtype);
        if (opts.progress) opts.progress(done, plan.bytes_out);
    };
    SafetensorsWriter::write_checkpoint(out_dir, out.entries, fill, opts.max_shard_bytes);

    // config.json with the quantization_config (K3: inside text_config, as published).
    (mc.is_k3_layout() ? config["text_config"] : config)["quantization_config"] =
        quantization_config(plan, mc.is_k3_layout(), targets);
    {
        std::ofstream f(out_dir + "/config.json");
        f << config.dump(2) << "\n";
        if (!f) throw Error(out_dir + "/config.json: write failed");
    }
    copy_other_files(in_dir, out_dir);
    return plan;
}

}   // namespace kimi
