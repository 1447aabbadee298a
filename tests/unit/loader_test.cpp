// Loader robustness: corrupt and adversarial safetensors files, sharded indexes, configs
// and checkpoints — each must give a clear kimi::Error naming the file and tensor/key,
// never a crash (this suite also runs under ASan + UBSan).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "model/config.h"
#include "model/kimi_model.h"
#include "model/random_checkpoint.h"
#include "model/safetensors.h"
#include "model/sequence_driver.h"
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
    const std::string h = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
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
    expect_error(bytes_with_header(R"({"t":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 8), "unsupported dtype 'Q4'");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "run past the data");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16), "expected 12");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 16), "run past");
    expect_error(bytes_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 16), "overlap");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 8), "non-negative");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}})", 8), "rank 5");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 8), "too large");
    expect_error(bytes_with_header(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 8), "missing dtype");
    expect_error(bytes_with_header(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 8), "data_offsets");
    expect_error(bytes_with_header(R"({"t":5})", 8), "must be an object");
}

TEST(Safetensors, RandomMutationsNeverCrash) {
    const std::string h = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
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
    rewrite_config([](nlohmann::json& j) { j["q_lora_rank"] = 16; });
    expect_load_error("q_lora_rank");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["vocab_size"] = "big"; });
    expect_load_error("'vocab_size' must be an integer");
    SetUp();
    rewrite_config([](nlohmann::json& j) { j["architectures"] = {"LlamaForCausalLM"}; });
    expect_load_error("only KimiLinearForCausalLM");
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
    std::ofstream(dir + "/model.safetensors.index.json") << R"({"weight_map":{"model.norm.weight":"model.safetensors"}})";
    expect_load_error("is not listed in");
}

TEST(RandomCheckpoint, DeterministicForASeed) {
    auto read = [](const std::string& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const std::string a = test::make_model("tiny", {}, 5), b = test::make_model("tiny", {}, 5), c = test::make_model("tiny", {}, 6);
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
}

}  // namespace
}  // namespace kimi
