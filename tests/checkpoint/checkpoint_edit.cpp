// Checkpoint-editing test helpers (see checkpoint_edit.h).
#include "checkpoint_edit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "core/error.h"
#include "model/kimi_model.h"
#include "checkpoint_make/quantize_checkpoint.h"
#include "checkpoint/weight_store.h"
#include "test_models.h"

namespace kimi::test {

std::string quantized(const std::string& src, const std::string& targets) {
    const std::string out = temp_dir("mxfp4") + "/q";
    QuantizeOptions o;
    o.targets = targets;
    o.threads = 2;
    quantize_checkpoint(src, out, o);
    return out;
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    std::ifstream in(dir + "/config.json");
    nlohmann::json j = nlohmann::json::parse(in);
    edit(j);
    std::ofstream(dir + "/config.json") << j.dump();
}

void expect_load_error(const std::string& dir, const std::string& needle) {
    try {
        KimiModel::load(dir);
        ADD_FAILURE() << "loaded; expected an error mentioning '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

void rewrite_tensors(const std::string& dir, const std::function<bool(SafetensorsWriter::Entry&)>& keep,
                     const ExtraTensors& extra) {
    std::vector<SafetensorsWriter::Entry> entries;
    std::map<std::string, std::vector<uint8_t>> bytes;
    {
        WeightStore s(dir, WeightMemory::kMmap);
        for (const auto& [name, t] : s.all_tensors()) {
            SafetensorsWriter::Entry e{name, t.dtype, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.rank)};
            const auto* p = static_cast<const uint8_t*>(t.data);
            bytes[name].assign(p, p + t.nbytes());
            if (keep(e)) entries.push_back(e);
        }
    }
    for (const auto& [e, b] : extra) {
        entries.push_back(e);
        bytes[e.name] = b;
    }
    SafetensorsWriter::write(dir + "/model.safetensors", entries,
                             [&](const SafetensorsWriter::Entry& e, uint64_t off, uint64_t n, void* out) {
                                 const auto& b = bytes[e.name];
                                 const size_t es = dtype_size(e.dtype), want = size_t(n) * es,
                                              have = b.size() > off * es ? b.size() - off * es : 0;
                                 std::memset(out, 0, want);
                                 std::memcpy(out, b.data() + off * es, std::min(want, have));
                             });
}

}   // namespace kimi::test
