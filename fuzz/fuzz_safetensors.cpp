// libFuzzer target: the checkpoint loader's parsers (src/model): the safetensors header and
// the model config.
// Input: byte 0 picks the parser, the rest is the file:
//   even  a safetensors file, parsed from memory (parse_safetensors, what SafetensorsFile
//         runs on the mapped bytes); byte 0 bit 1 set: the file's bytes start at an odd
//         address (the alignment check)
//   odd   config.json, written to a private scratch folder and loaded as the engine loads it
//         (load_model_config: file checks, JSON parse, validation, quantization_config)
// Checked beyond "no crash": every tensor of an accepted header lies inside the data, its
// byte length is numel × dtype size, tensors do not overlap; an accepted config's layer map
// covers every layer and its sizes are in range.
// Clean errors: kimi::Error.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "model/config.h"
#include "checkpoint/safetensors.h"

namespace {

using kimi::fuzz::Input;

void check_tensors(const std::map<std::string, kimi::Tensor>& ts, const unsigned char* file, size_t size) {
    std::vector<std::pair<const unsigned char*, const unsigned char*>> spans;
    for (const auto& [name, t] : ts) {
        uint64_t numel = 1;
        for (int i = 0; i < t.rank; ++i) numel *= uint64_t(t.shape[size_t(i)]);
        const uint64_t bytes = numel * kimi::dtype_size(t.dtype);
        const auto* p = static_cast<const unsigned char*>(t.data);
        fuzz_assert(p >= file && p + bytes <= file + size, "tensor '" + name + "' outside the file");
        if (bytes) spans.push_back({p, p + bytes});
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) fuzz_assert(spans[i].first >= spans[i - 1].second, "tensors overlap");
}

void safetensors(Input& in, bool odd) {
    const std::string_view bytes = in.rest();
    std::vector<unsigned char> buf(bytes.size() + 1);
    unsigned char* file = buf.data() + (odd ? 1 : 0);
    if (!bytes.empty()) std::memcpy(file, bytes.data(), bytes.size());
    try {
        check_tensors(kimi::parse_safetensors(file, bytes.size(), "fuzz.safetensors"), file, bytes.size());
    } catch (const kimi::Error& e) {
        kimi::fuzz::note_refusal(e.what());
    }
}

void config(Input& in) {
    static const std::string dir = kimi::fuzz::scratch_dir() + "/model";
    static const bool made = std::filesystem::create_directories(dir);
    (void)made;
    {
        std::ofstream f(dir + "/config.json", std::ios::binary | std::ios::trunc);
        const std::string_view text = in.rest();
        f.write(text.data(), std::streamsize(text.size()));
    }
    try {
        const kimi::ModelConfig c = kimi::load_model_config(dir);
        fuzz_assert(int64_t(c.layer_kinds.size()) == c.n_layers, "layer map size");
        fuzz_assert(c.n_kda_layers() + c.n_mla_layers() == c.n_layers, "layer kinds");
        fuzz_assert(c.n_experts_per_token >= 1 && c.n_experts_per_token <= c.n_experts, "experts per token");
        fuzz_assert(c.n_expert_groups >= 1 && c.n_experts % c.n_expert_groups == 0, "expert groups");
        fuzz_assert(c.vocab_size >= 1 && c.hidden_size >= 1, "sizes");
        // the quantization matchers run on module names (std::regex for `re:` entries)
        for (const char* module :
             {"model.layers.0.mlp.experts.1.w1", "language_model.model.layers.3.self_attn.q_proj", "lm_head"})
            (void)c.quant.why_not(module);
    } catch (const kimi::Error& e) {
        kimi::fuzz::note_refusal(e.what());
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.byte();
    if (mode & 1)
        config(in);
    else
        safetensors(in, mode & 2);
    return 0;
}
