// SafetensorsWriter implementation.
#include "checkpoint/safetensors_writer.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kimi {

uint64_t SafetensorsWriter::Entry::numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= uint64_t(d);
    return n;
}

void SafetensorsWriter::write(const std::string& path, std::vector<Entry> entries, const Filler& fill) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    nlohmann::json header = nlohmann::json::object();
    uint64_t offset = 0;
    for (const auto& e : entries) {
        const uint64_t bytes = e.numel() * dtype_size(e.dtype);
        header[e.name] = {
            {"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    header["__metadata__"] = {{"format", "pt"}};
    std::string text = header.dump();
    while ((8 + text.size()) % 8 != 0) text.push_back(' ');

    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    if (!f) throw Error(path + ": cannot create");
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
    bool ok = std::fwrite(len, 1, 8, f.get()) == 8 && std::fwrite(text.data(), 1, text.size(), f.get()) == text.size();
    constexpr uint64_t kChunk = uint64_t(1) << 22;   // elements per write
    std::vector<unsigned char> buf;
    for (const auto& e : entries) {
        const size_t es = dtype_size(e.dtype);
        for (uint64_t at = 0; ok && at < e.numel(); at += kChunk) {
            const uint64_t n = std::min(kChunk, e.numel() - at);
            buf.resize(size_t(n) * es);
            fill(e, at, n, buf.data());
            ok = std::fwrite(buf.data(), es, size_t(n), f.get()) == size_t(n);
        }
    }
    if (!ok || std::fflush(f.get()) != 0) throw Error(path + ": write failed (disk full?)");
}

void SafetensorsWriter::write_checkpoint(const std::string& dir, std::vector<Entry> entries, const Filler& fill,
                                         uint64_t max_shard_bytes) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    std::vector<std::vector<Entry>> shards(1);
    uint64_t in_shard = 0, total = 0;
    for (auto& e : entries) {
        const uint64_t bytes = e.numel() * dtype_size(e.dtype);
        if (max_shard_bytes > 0 && in_shard > 0 && in_shard + bytes > max_shard_bytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        in_shard += bytes;
        total += bytes;
        shards.back().push_back(std::move(e));
    }
    if (shards.size() == 1) {
        write(dir + "/model.safetensors", std::move(shards[0]), fill);
        return;
    }
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}},
                                    {"weight_map", nlohmann::ordered_json::object()}};
    for (size_t i = 0; i < shards.size(); ++i) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
        for (const auto& e : shards[i]) index["weight_map"][e.name] = name;
        write(dir + "/" + name, std::move(shards[i]), fill);
    }
    std::ofstream f(dir + "/model.safetensors.index.json");
    f << index.dump(2) << "\n";
    if (!f) throw Error(dir + "/model.safetensors.index.json: write failed");
}

}   // namespace kimi
