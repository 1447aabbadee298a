// Safetensors parsing and validation (format: huggingface/safetensors README).
#include "checkpoint/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace kimi {

std::map<std::string, Tensor> parse_safetensors(const unsigned char* data, size_t size, const std::string& path) {
    using nlohmann::json;
    if (size < 8) throw Error(path + ": truncated (" + std::to_string(size) + " bytes, no safetensors header)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    if (n > SafetensorsFile::kMaxHeaderBytes)
        throw Error(path + ": header length " + std::to_string(n) + " exceeds the 100 MiB limit");
    if (n > size - 8)
        throw Error(path + ": truncated (header length " + std::to_string(n) + " runs past the end of the file)");
    json h;
    try {
        h = json::parse(reinterpret_cast<const char*>(data) + 8, reinterpret_cast<const char*>(data) + 8 + n);
    } catch (const json::exception& e) {
        throw Error(path + ": header is not valid JSON: " + e.what());
    }
    if (!h.is_object()) throw Error(path + ": header must be a JSON object");
    const unsigned char* base = data + 8 + n;
    const uint64_t data_size = size - 8 - n;

    std::map<std::string, Tensor> out;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") continue;
        const std::string where = path + ": tensor '" + name + "'";
        const json& e = it.value();
        if (!e.is_object()) throw Error(where + ": entry must be an object");
        auto dt = e.find("dtype");
        auto sh = e.find("shape");
        auto off = e.find("data_offsets");
        if (dt == e.end() || !dt->is_string()) throw Error(where + ": missing dtype");
        if (sh == e.end() || !sh->is_array()) throw Error(where + ": missing shape");
        if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
            !(*off)[1].is_number_unsigned())
            throw Error(where + ": data_offsets must be two non-negative integers");
        DType dtype;
        if (!dtype_from_name(dt->get<std::string>(), dtype) || is_block_quant(dtype))
            throw Error(where + ": unsupported dtype '" + dt->get<std::string>() +
                        "' (accepted: F32, BF16, F16, I32, U8)");
        if (sh->size() > 4) throw Error(where + ": rank " + std::to_string(sh->size()) + " > 4");
        Tensor t;
        t.dtype = dtype;
        uint64_t numel = 1;
        for (const auto& d : *sh) {
            if (!d.is_number_unsigned()) throw Error(where + ": shape entries must be non-negative integers");
            const uint64_t v = d.get<uint64_t>();
            if (v > (uint64_t(1) << 40) || (v && numel > (uint64_t(1) << 40) / v))
                throw Error(where + ": shape too large");
            numel *= v;
            t.shape[size_t(t.rank++)] = int64_t(v);
        }
        const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
        if (begin > end || end > data_size)
            throw Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        ") run past the data (" + std::to_string(data_size) + " bytes; file truncated?)");
        if (end - begin != numel * dtype_size(dtype))
            throw Error(where + ": " + std::to_string(end - begin) + " bytes of data for shape " + shape_str(t) + " " +
                        dtype_name(dtype) + " (expected " + std::to_string(numel * dtype_size(dtype)) + ")");
        if (reinterpret_cast<uintptr_t>(base + begin) % dtype_size(dtype) != 0)
            throw Error(where + ": data is not aligned to its " + std::to_string(dtype_size(dtype)) +
                        "-byte element size (the header must be padded)");
        t.data = const_cast<unsigned char*>(base + begin);
        ranges.push_back({begin, end});
        out.emplace(name, t);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second)
            throw Error(path + ": tensor data ranges overlap (at byte " + std::to_string(ranges[i].first) + ")");
    return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path, FileMemory mode, const std::function<void(uint64_t)>& on_read)
    : file_(std::make_unique<MappedFile>(path, mode, on_read)) {
    tensors_ = parse_safetensors(file_->data(), file_->size(), path);
}

}   // namespace kimi
