// Loader robustness: corrupt and adversarial safetensors files, sharded indexes, configs
// and checkpoints — each must give a clear kimi::Error naming the file and tensor/key,
// never a crash (this suite also runs under ASan + UBSan).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "model/config.h"
#include "model/kimi_model.h"
#include "checkpoint_make/random_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"
#include "runtime/sequence_driver.h"
#include "test_models.h"

namespace kimi {
namespace {

std::string bytes_with_header(const std::string& header, size_t data_bytes, uint64_t claimed_len = 0) {
    std::string s(8, '\0');
    const uint64_t n = claimed_len ? claimed_len : header.size();
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(n >> (8 * i)));
    return s + header + std::string(data_bytes, '\x01');
}

void expect_error(const std::string& content, const std::string& needle) {
    try {
        parse_safetensors(reinterpret_cast<const unsigned char*>(content.data()), content.size(), "x.safetensors");
        ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("x.safetensors"), std::string::npos) << e.what();
    }
}

TEST(Safetensors, ParsesAValidFile) {
    const std::string h =
        R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
    std::string padded = h;
    while ((8 + padded.size()) % 8) padded += ' ';
    const std::string f = bytes_with_header(padded, 22);
    auto m = parse_safetensors(reinterpret_cast<const unsigned char*>(f.data()), f.size(), "ok");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m["a"].dim(1), 2);
    EXPECT_EQ(m["b"].dtype, DType::kBF16);
}

TEST(Safetensors, CorruptFiles) {
    expect_error("abc", "truncated");
    expect_error(bytes_with_header("{}", 0, 1000), "runs past the end");
    expect_error(bytes_with_header("{}", 0, uint64_t(1) << 40), "exceeds the 100 MiB limit");
    expect_error(bytes_with_header("{not json", 0), "not valid JSON");
    expect_error(bytes_with_header("[1,2]", 0), "must be a JSON object");
    expect_error(bytes_with_header(R"({"t":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 8),
                 "unsupported dtype 'Q4'");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                 "run past the data");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16), "expected 12");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 16), "run past");
    expect_error(
        bytes_with_header(
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            16),
        "overlap");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 8), "non-negative");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}})", 8), "rank 5");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 8),
                 "too large");
    expect_error(bytes_with_header(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 8), "missing dtype");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 8), "data_offsets");
    expect_error(bytes_with_header(R"({"t":5})", 8), "must be an object");
}

TEST(Safetensors, RandomMutationsNeverCrash) {
    const std::string h =
        R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
    const std::string good = bytes_with_header(h, 22);
    Rng rng(11);
    int errors = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::string f = good;
        const int n_mut = 1 + int(rng.below(4));
        for (int m = 0; m < n_mut; ++m) {
            const size_t pos = size_t(rng.below(f.size()));
            switch (rng.below(3)) {
                case 0: f[pos] = char(rng.below(256)); break;
                case 1: f.erase(pos, 1 + size_t(rng.below(8))); break;
                default: f = f.substr(0, pos); break;
            }
            if (f.empty()) f = "x";
        }
        try {
            parse_safetensors(reinterpret_cast<const unsigned char*>(f.data()), f.size(), "fuzz");
        } catch (const Error&) {
            ++errors;
        }
    }
    EXPECT_GT(errors, 1000);
}

// Checkpoint-level errors: write a tiny model, then damage one thing.
class Checkpoint : public ::testing::Test {
protected:
    void SetUp() override { dir = test::make_model("tiny", {}, 9); }
    void rewrite_config(const std::function<void(nlohmann::json&)>& edit) {
        std::ifstream in(dir + "/config.json");
        nlohmann::json j = nlohmann::json::parse(in);
        edit(j);
        std::ofstream(dir + "/config.json") << j.dump();
    }
    void expect_load_error(const std::string& needle) {
        try {
            KimiModel::load(dir);
            ADD_FAILURE() << "loaded; expected an error mentioning '" << needle << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    }
    std::string dir;
};

TEST_F(Checkpoint, LoadsIntactAndRuns) {
    // Also a forward pass with fillers and decode steps, so the sanitizer build sees the kernels.
    auto m = KimiModel::load(dir);
    test::Runner r(2, Precision::kBF16);
    const auto logits = score_sequence(*m, r.ex, test::random_tokens(20, m->config().vocab_size, 1), {3, 12, 2, 5});
    EXPECT_EQ(logits.size(), size_t(20 * m->config().vocab_size));
}

TEST_F(Checkpoint, MappedAndHugePageCopyAgree) {
    // The two ways of holding the weights: same bytes, so the same logits bit for bit; the copy
    // is a private, read-only buffer, not the file's mapping.
    auto mapped = KimiModel::load(dir, {}, WeightMemory::kMmap);
    uint64_t reported = 0, total = 0;
    auto copied = KimiModel::load(
        dir, [&](uint64_t done, uint64_t all) { reported = done, total = all; }, WeightMemory::kCopy);
    EXPECT_EQ(mapped->store().file_memory(), FileMemory::kMap);
    EXPECT_EQ(copied->store().file_memory(), FileMemory::kHugeCopy);
    EXPECT_GT(total, 0u);
    EXPECT_EQ(reported, total);   // progress reached the end of the files
    const Tensor& a = mapped->weights().lm_head;
    const Tensor& b = copied->weights().lm_head;
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_NE(a.data, b.data);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes()), 0);
    test::Runner r(2, Precision::kBF16);
    const auto ids = test::random_tokens(12, mapped->config().vocab_size, 4);
    EXPECT_EQ(score_sequence(*mapped, r.ex, ids, {5, 7}), score_sequence(*copied, r.ex, ids, {5, 7}));
}

// Which memory the weights go to: a copy into huge pages when they fit, the file mapped
// otherwise, and never populated at load when they do not fit (decode then faults in the
// pages it uses, and the page cache keeps the ones it keeps using).
TEST(WeightMemoryChoice, LargerThanMemoryIsMappedLazily) {
    const uint64_t gib = uint64_t(1) << 30;
    EXPECT_EQ(resolve_file_memory(WeightMemory::kAuto, 2 * gib, 16 * gib, true), FileMemory::kHugeCopy);
    EXPECT_EQ(resolve_file_memory(WeightMemory::kAuto, 2 * gib, 16 * gib, false), FileMemory::kMap);
    EXPECT_EQ(resolve_file_memory(WeightMemory::kAuto, 13 * gib, 16 * gib, true), FileMemory::kMapLazy);
    EXPECT_EQ(resolve_file_memory(WeightMemory::kMmap, 2 * gib, 16 * gib, true), FileMemory::kMap);
    EXPECT_EQ(resolve_file_memory(WeightMemory::kMmap, 1500 * gib, 16 * gib, true), FileMemory::kMapLazy);
    EXPECT_EQ(resolve_file_memory(WeightMemory::kCopy, 13 * gib, 16 * gib, true), FileMemory::kHugeCopy);
    EXPECT_EQ(resolve_file_memory(WeightMemory::kMmapLazy, 1 * gib, 16 * gib, true), FileMemory::kMapLazy);
    // the figure itself: never above MemAvailable, and positive on a working machine
    EXPECT_GT(memory_available_bytes(), 0u);
    EXPECT_LE(memory_available_bytes(), cgroup_memory_room_bytes());
}

TEST_F(Checkpoint, OutOfRangeTokenIsAnError) {
    auto m = KimiModel::load(dir);
    test::Runner r(1);
    EXPECT_THROW(score_sequence(*m, r.ex, {1, 2, int32_t(m->config().vocab_size)}, {}), Error);
    EXPECT_THROW(score_sequence(*m, r.ex, {-1}, {}), Error);
}

TEST_F(Checkpoint, ConfigErrorsNameTheKey) {
    rewrite_config([](nlohmann::json& j) { j.erase("hidden_size"); });
    expect_load_error("'hidden_size' is missing");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["linear_attn_config"]["kda_layers"] = {1, 2}; });
    expect_load_error("cover every layer");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["linear_attn_config"]["kda_layers"] = {0, 1, 2}; });
    expect_load_error("1-based");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["num_experts_per_token"] = 99; });
    expect_load_error("num_experts_per_token");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["q_lora_rank"] = 16; });   // q-LoRA wants tensors this checkpoint lacks
    expect_load_error("missing tensor 'model.layers.3.self_attn.q_a_proj.weight'");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["hidden_act"] = "gelu"; });
    expect_load_error("'hidden_act' = \"gelu\" is not supported");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["vocab_size"] = "big"; });
    expect_load_error("'vocab_size' must be an integer");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["architectures"] = {"LlamaForCausalLM"}; });
    expect_load_error("only KimiLinearForCausalLM and KimiK3ForConditionalGeneration");
    SetUp();
    std::ofstream(dir + "/config.json") << "{ broken";
    expect_load_error("invalid JSON");
}

TEST_F(Checkpoint, ShapeMismatchNamesTheTensor) {
    rewrite_config([](nlohmann::json& j) { j["moe_intermediate_size"] = 48; });   // weights were made for 32
    expect_load_error("model.layers.1.block_sparse_moe.experts.0.w1.weight': shape [32, 64], expected [48, 64]");
}

TEST_F(Checkpoint, MissingAndExtraTensors) {
    rewrite_config([](nlohmann::json& j) { j["tie_word_embeddings"] = true; });   // lm_head now unexpected
    expect_load_error("unexpected tensor 'lm_head.weight'");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["num_shared_experts"] = 0; });
    expect_load_error("unexpected tensor 'model.layers.1.block_sparse_moe.shared_experts");
    SetUp();
    rewrite_config([](nlohmann::json& j) {
        j["first_k_dense_replace"] = 0;   // layer 0 now wants MoE tensors
    });
    expect_load_error("missing tensor 'model.layers.0.block_sparse_moe.gate.weight'");
}

TEST_F(Checkpoint, TruncatedFile) {
    const std::string path = dir + "/model.safetensors";
    std::ifstream in(path, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << all.substr(0, all.size() - 100);
    expect_load_error("run past the data");
}

TEST_F(Checkpoint, ShardedIndex) {
    // Split into two shards by rewriting: index naming a shard that is missing → error.
    std::ofstream(dir + "/model.safetensors.index.json")
        << R"({"metadata":{},"weight_map":{"model.embed_tokens.weight":"model-00001-of-00002.safetensors"}})";
    expect_load_error("model-00001-of-00002.safetensors: cannot open");
    std::ofstream(dir + "/model.safetensors.index.json") << R"({"weight_map":{"a":"../etc/passwd"}})";
    expect_load_error("invalid file");
    std::ofstream(dir + "/model.safetensors.index.json")
        << R"({"weight_map":{"model.norm.weight":"model.safetensors"}})";
    expect_load_error("is not listed in");
}

// A safetensors file rewritten tensor by tensor: `keep` drops tensors, `reshape` may give a
// tensor a new shape (its first elements are kept, in order).
void rewrite_safetensors(
    const std::string& path, const std::function<bool(const std::string&)>& keep,
    const std::function<std::vector<int64_t>(const std::string&, std::vector<int64_t>)>& reshape = {}) {
    std::ifstream in(path, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto tensors = parse_safetensors(reinterpret_cast<const unsigned char*>(all.data()), all.size(), path);
    std::vector<SafetensorsWriter::Entry> entries;
    for (const auto& [name, t] : tensors) {
        if (!keep(name)) continue;
        std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.rank);
        entries.push_back({name, t.dtype, reshape ? reshape(name, shape) : shape});
    }
    SafetensorsWriter::write(path + ".new", entries,
                             [&](const SafetensorsWriter::Entry& e, uint64_t off, uint64_t n, void* out) {
                                 const Tensor& t = tensors.at(e.name);
                                 std::memcpy(out, static_cast<const char*>(t.data) + off * dtype_size(t.dtype),
                                             size_t(n) * dtype_size(t.dtype));
                             });
    std::rename((path + ".new").c_str(), path.c_str());
}

// The Kimi-K3 layout: nested text_config, language_model. prefix, the vision tower at the top level.
class K3Checkpoint : public Checkpoint {
protected:
    void SetUp() override { dir = test::make_model("k3-tiny", {}, 9); }
    void rewrite_text_config(const std::function<void(nlohmann::json&)>& edit) {
        rewrite_config([&](nlohmann::json& j) { edit(j["text_config"]); });
    }
    std::string file() const { return dir + "/model.safetensors"; }
};

// A vision_config the engine cannot run (here an unknown MLP type) costs the images, not the
// model: the text model loads (the tower's tensors skipped) and the reason names the key.
TEST_F(K3Checkpoint, UnsupportedVisionConfigLoadsTheTextModel) {
    rewrite_config([](nlohmann::json& j) { j["vision_config"]["mlp_type"] = "mlp3"; });
    auto m = KimiModel::load(dir);
    EXPECT_FALSE(m->has_vision());
    EXPECT_GT(m->store().n_skipped(), 0u);   // vision_tower.* and mm_projector.* are left unread
    const std::string why = m->vision_unavailable_reason();
    EXPECT_NE(why.find("vision_config.mlp_type"), std::string::npos) << why;
    EXPECT_NE(why.find("the text model works"), std::string::npos) << why;
    test::Runner r(2);
    const auto logits = score_sequence(*m, r.ex, test::random_tokens(9, m->config().vocab_size, 2), {});
    EXPECT_EQ(logits.size(), size_t(9 * m->config().vocab_size));
}

TEST_F(K3Checkpoint, LoadsWithAndWithoutVisionTensors) {
    {
        auto m = KimiModel::load(dir);
        EXPECT_TRUE(m->config().is_k3_layout());
        EXPECT_EQ(m->store().n_skipped(), 0u);   // the tower is read, not skipped
        ASSERT_TRUE(m->has_vision());
        EXPECT_EQ(m->weights().vision->blocks.size(), 2u);
        EXPECT_EQ(m->weights().vision->patch.dim(1), 3 * 14 * 14);
        EXPECT_EQ(m->vision_unavailable_reason(), "");
        EXPECT_TRUE(m->weights().layers[0].kda.g_proj.defined());
        EXPECT_FALSE(m->weights().layers[0].kda.g_a.defined());
        EXPECT_TRUE(m->weights().layers[3].mla.q_a.defined());
        EXPECT_TRUE(m->weights().layers[3].mla.g_proj.defined());
        EXPECT_TRUE(m->weights().layers[1].moe.latent_norm.defined());
        EXPECT_TRUE(m->weights().output_res_score.defined());
    }
    rewrite_safetensors(file(), [](const std::string& n) { return n.rfind("language_model.", 0) == 0; });
    auto m = KimiModel::load(dir);   // a text-only export: served without images
    EXPECT_EQ(m->store().n_skipped(), 0u);
    EXPECT_FALSE(m->has_vision());
    EXPECT_NE(m->vision_unavailable_reason().find("no vision tower"), std::string::npos);
    test::Runner r(2);
    const auto logits = score_sequence(*m, r.ex, test::random_tokens(9, m->config().vocab_size, 2), {});
    EXPECT_EQ(logits.size(), size_t(9 * m->config().vocab_size));
}

// A tower with a tensor missing is an error naming it (a partial tower is never served).
TEST_F(K3Checkpoint, PartialVisionTowerIsAnError) {
    rewrite_safetensors(file(), [](const std::string& n) { return n != "mm_projector.post_norm.weight"; });
    try {
        KimiModel::load(dir);
        FAIL() << "loaded a tower without its projector norm";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("mm_projector.post_norm.weight"), std::string::npos) << e.what();
    }
}

TEST_F(K3Checkpoint, MissingTensorAndWrongShape) {
    rewrite_safetensors(
        file(), [](const std::string& n) { return n != "language_model.model.layers.3.self_attn.g_proj.weight"; });
    expect_load_error("missing tensor 'language_model.model.layers.3.self_attn.g_proj.weight'");
    SetUp();
    rewrite_safetensors(file(),
                        [](const std::string& n) { return n != "language_model.model.output_attn_res_proj.weight"; });
    expect_load_error("missing tensor 'language_model.model.output_attn_res_proj.weight'");
    SetUp();
    rewrite_text_config([](nlohmann::json& t) { t["routed_expert_hidden_size"] = 40; });   // weights were made for 48
    expect_load_error(
        "language_model.model.layers.1.block_sparse_moe.routed_expert_down_proj.weight': shape [48, 64], expected [40, "
        "64]");
    SetUp();
    rewrite_text_config([](nlohmann::json& t) { t["linear_attn_config"]["use_full_rank_gate"] = false; });
    expect_load_error("missing tensor 'language_model.model.layers.0.self_attn.g_a_proj.weight'");
}

TEST_F(K3Checkpoint, PaddedALog) {
    // published: padded to head_dim (16 here) beyond the 2 heads; shorter than H is an error
    rewrite_safetensors(
        file(), [](const std::string&) { return true; },
        [](const std::string& n, std::vector<int64_t> shape) {
            return n == "language_model.model.layers.2.self_attn.A_log" ? std::vector<int64_t>{1} : shape;
        });
    expect_load_error(
        "layers.2.self_attn.A_log': shape [1], expected [1, 1, 2, 1] or a vector of at least the 2 KDA heads");
    SetUp();
    rewrite_safetensors(
        file(), [](const std::string&) { return true; },
        [](const std::string& n, std::vector<int64_t> shape) {
            return n.find("A_log") != std::string::npos ? std::vector<int64_t>{2} : shape;   // unpadded [H]
        });
    EXPECT_NO_THROW(KimiModel::load(dir));
}

TEST_F(K3Checkpoint, ConfigErrors) {
    rewrite_text_config([](nlohmann::json& t) { t.erase("hidden_size"); });
    expect_load_error("config key 'text_config.hidden_size' is missing");
    SetUp();
    rewrite_text_config([](nlohmann::json& t) { t["hidden_act"] = "swiglu"; });
    expect_load_error("'text_config.hidden_act' = \"swiglu\" is not supported");
    SetUp();
    rewrite_text_config([](nlohmann::json& t) { t.erase("activation_situ_beta"); });
    expect_load_error("'text_config.activation_situ_beta' is missing");
    SetUp();
    rewrite_text_config([](nlohmann::json& t) { t["linear_attn_config"]["gate_lower_bound"] = 2.0; });
    expect_load_error("gate_lower_bound");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j.erase("text_config"); });
    expect_load_error("config key 'text_config' is missing");
    SetUp();
    rewrite_config([](nlohmann::json& j) {
        j["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                    {"config_groups", {{"group_0", {{"format", "mxfp4-pack-quantized"}}}}}};
    });
    expect_load_error("config_groups.group_0.weights: missing");
    SetUp();
    rewrite_text_config([](nlohmann::json& t) { t["quantization_config"] = {{"quant_method", "fp8"}}; });
    expect_load_error("text_config.quantization_config: quant_method 'fp8' is not supported");
}

TEST(K3Sharded, LoadsFromAnIndex) {
    const std::string dir = test::temp_dir("k3shard");
    write_random_checkpoint(dir, model_preset("k3-tiny"), 3, nullptr, 256 << 10);
    std::ifstream idx(dir + "/model.safetensors.index.json");
    ASSERT_TRUE(idx.good());
    const auto j = nlohmann::json::parse(idx);
    EXPECT_TRUE(j["weight_map"].contains("language_model.lm_head.weight"));
    EXPECT_TRUE(j["weight_map"].contains("vision_tower.patch_embed.proj.weight"));
    auto m = KimiModel::load(dir);
    EXPECT_GT(m->store().n_files(), 2u);
    EXPECT_EQ(m->store().n_skipped(), 0u);
    EXPECT_TRUE(m->has_vision());
    // the same weights as the single-file checkpoint of the same seed: bit-identical logits
    auto one = KimiModel::load(test::make_model("k3-tiny", {}, 3));
    const auto toks = test::random_tokens(11, m->config().vocab_size, 4);
    test::Runner r(2);
    const auto a = score_sequence(*m, r.ex, toks, {}), b = score_sequence(*one, r.ex, toks, {});
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(RandomCheckpoint, DeterministicForASeed) {
    auto read = [](const std::string& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const std::string a = test::make_model("tiny", {}, 5), b = test::make_model("tiny", {}, 5),
                      c = test::make_model("tiny", {}, 6);
    EXPECT_EQ(read(a + "/model.safetensors"), read(b + "/model.safetensors"));
    EXPECT_NE(read(a + "/model.safetensors"), read(c + "/model.safetensors"));
    EXPECT_EQ(read(a + "/config.json"), read(b + "/config.json"));
}

TEST(RandomCheckpoint, OverridesAndPresets) {
    nlohmann::ordered_json c = model_preset("tiny");
    apply_config_override(c, "linear_attn_config.num_heads=3");
    apply_config_override(c, "vocab_size=2048");
    apply_config_override(c, "q_lora_rank=null");
    EXPECT_EQ(c["linear_attn_config"]["num_heads"], 3);
    EXPECT_EQ(c["bos_token_id"], 2048 - 256);
    EXPECT_TRUE(c["q_lora_rank"].is_null());
    EXPECT_THROW(apply_config_override(c, "novalue"), Error);
    EXPECT_THROW(model_preset("huge"), Error);
    for (const auto& name : model_preset_names())
        EXPECT_NO_THROW(parse_model_config(nlohmann::json::parse(model_preset(name).dump()), name));
    // nested keys of a K3 config, and its dependent keys
    nlohmann::ordered_json k = model_preset("k3-tiny");
    apply_config_override(k, "text_config.attn_res_block_size=3");
    apply_config_override(k, "text_config.vocab_size=2048");
    apply_config_override(k, "text_config.num_attention_heads=6");
    EXPECT_EQ(k["text_config"]["attn_res_block_size"], 3);
    EXPECT_EQ(k["text_config"]["eos_token_id"], 2048 - 256 + 2);
    EXPECT_EQ(k["eos_token_id"], 2048 - 256 + 2);
    EXPECT_FALSE(k.contains("vocab_size"));
    EXPECT_EQ(k["text_config"]["num_key_value_heads"], 6);
}

}   // namespace
}   // namespace kimi
