// Kimi-K3's MXFP4 checkpoint as published: the routed experts packed, everything else dense
// (the router, the latent projections and the AttnRes vectors too, although the config's
// "Linear" target names them), with the quantization_config inside text_config. The file
// decides each weight's form; the config cross-checks (errors for a packed module the config
// does not quantize and for a module stored both ways). make-model --mxfp4-experts writes this
// form, and quantize --targets experts of a K3 checkpoint writes the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint_edit.h"
#include "model/kimi_model.h"
#include "checkpoint/quant_config.h"
#include "runtime/sequence_driver.h"
#include "checkpoint/weight_store.h"
#include "test_models.h"

namespace kimi {
namespace {

using test::edit_config;
using test::expect_load_error;
using test::rewrite_tensors;

// K3 at tiny widths whose expert widths are multiples of 32 (latent 64, intermediate 32).
const std::vector<std::string> kK3 = {"text_config.routed_expert_hidden_size=64",
                                      "text_config.num_experts_per_token=3"};

nlohmann::json read_config(const std::string& dir) {
    std::ifstream in(dir + "/config.json");
    return nlohmann::json::parse(in);
}

TEST(Mxfp4Published, TheBlockIsThePublishedOne) {
    // as the published config.json carries it (less the observer fields)
    const auto want = nlohmann::json::parse(R"({"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
      "quantization_status": "compressed",
      "config_groups": {"group_0": {"format": "mxfp4-pack-quantized", "targets": ["Linear"], "input_activations": null,
        "output_activations": null, "weights": {"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32,
        "symmetric": true, "dynamic": false, "scale_dtype": "torch.uint8"}}},
      "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*",
        "re:.*vision_tower.*", "re:.*mm_projector.*"]})");
    EXPECT_EQ(nlohmann::json::parse(published_k3_quant_config().dump()), want);
    const QuantConfig q = parse_quant_config(want, "config.json: text_config.");
    const std::string l = "language_model.model.layers.3.";
    EXPECT_TRUE(q.quantizes(l + "block_sparse_moe.experts.7.w2"));
    EXPECT_TRUE(q.quantizes(l + "block_sparse_moe.gate"));   // not ignored: stored dense all the same
    EXPECT_TRUE(q.quantizes(l + "block_sparse_moe.routed_expert_down_proj"));
    EXPECT_TRUE(q.quantizes(l + "self_attention_res_proj"));   // "self_attention", not "self_attn"
    EXPECT_TRUE(q.quantizes(l + "mlp_res_proj"));              // "mlp_", not "mlp."
    EXPECT_FALSE(q.quantizes(l + "self_attn.q_b_proj"));
    EXPECT_FALSE(q.quantizes(l + "block_sparse_moe.shared_experts.down_proj"));
    EXPECT_FALSE(q.quantizes("language_model.model.layers.0.mlp.gate_proj"));
    EXPECT_FALSE(q.quantizes("language_model.lm_head"));
    EXPECT_NE(q.why_not("language_model.lm_head").find("'re:.*lm_head.*'"), std::string::npos)
        << q.why_not("language_model.lm_head");
}

// Loads `dir` and checks the published form: every routed expert MXFP4 and nothing else; the
// dense modules the config targets counted by kind.
void expect_published_form(const std::string& dir) {
    auto m = KimiModel::load(dir);
    const ModelConfig& c = m->config();
    ASSERT_TRUE(c.quant.mxfp4);
    int64_t n_moe = 0;
    for (int64_t i = 0; i < c.n_layers; ++i) n_moe += c.is_moe_layer(i);
    const auto& mx = m->store().mxfp4_linears();
    ASSERT_EQ(mx.size(), 1u);
    EXPECT_EQ(mx.at("routed experts"), 3 * c.n_experts * n_moe);
    const std::map<std::string, int64_t> dense{
        {"routers", n_moe}, {"latent projections", 2 * n_moe}, {"AttnRes vectors", 2 * c.n_layers + 1}};
    EXPECT_EQ(m->store().dense_but_targeted(), dense);
    const auto& l = m->weights().layers[1];
    EXPECT_EQ(l.moe.experts[0].gate.dtype, DType::kMXFP4);
    EXPECT_EQ(l.moe.latent_down.dtype, DType::kBF16);
    EXPECT_EQ(l.moe.shared.gate.dtype, DType::kBF16);
    test::Runner r(2);
    const auto toks = test::random_tokens(11, c.vocab_size, 3);
    const auto whole = score_sequence(*m, r.ex, toks, {}), chunked = score_sequence(*m, r.ex, toks, {3, 1, 7});
    EXPECT_EQ(0, std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)));
}

TEST(Mxfp4Published, LoadsWithTheBlockAtEitherLevel) {
    const std::string d = test::make_model("k3-tiny", kK3, 21, /*mxfp4_experts=*/true);
    const nlohmann::json cfg = read_config(d);
    ASSERT_TRUE(cfg["text_config"].contains("quantization_config"));
    ASSERT_FALSE(cfg.contains("quantization_config"));
    // the published dtypes beside the packed experts
    {
        WeightStore s(d, WeightMemory::kMmap);
        std::map<std::string, DType> dt;
        for (const auto& [n, t] : s.all_tensors()) dt[n] = t.dtype;
        const std::string l = "language_model.model.layers.1.";
        EXPECT_EQ(dt.at(l + "block_sparse_moe.experts.0.w1.weight_packed"), DType::kU8);
        EXPECT_EQ(dt.at(l + "block_sparse_moe.experts.0.w1.weight_scale"), DType::kU8);
        EXPECT_FALSE(dt.count(l + "block_sparse_moe.experts.0.w1.weight"));
        EXPECT_EQ(dt.at(l + "block_sparse_moe.gate.weight"), DType::kBF16);
        EXPECT_EQ(dt.at(l + "block_sparse_moe.gate.e_score_correction_bias"), DType::kF32);
        EXPECT_EQ(dt.at(l + "block_sparse_moe.routed_expert_up_proj.weight"), DType::kBF16);
        EXPECT_EQ(dt.at(l + "self_attention_res_proj.weight"), DType::kBF16);
        EXPECT_EQ(dt.at(l + "self_attn.A_log"), DType::kF32);
        EXPECT_EQ(dt.at(l + "self_attn.dt_bias"), DType::kF32);
        EXPECT_EQ(dt.at(l + "self_attn.q_conv1d.weight"), DType::kF32);
        EXPECT_EQ(dt.at(l + "self_attn.o_norm.weight"), DType::kF32);
        EXPECT_EQ(dt.at(l + "self_attn.q_proj.weight"), DType::kBF16);
    }
    expect_published_form(d);
    edit_config(d, [](nlohmann::json& j) {   // the same block at the top level
        j["quantization_config"] = j["text_config"]["quantization_config"];
        j["text_config"].erase("quantization_config");
    });
    expect_published_form(d);
}

TEST(Mxfp4Published, MakeModelEqualsQuantizeOfTheDenseCheckpoint) {
    const std::string packed = test::make_model("k3-tiny", kK3, 22, true);
    const std::string q = test::quantized(test::make_model("k3-tiny", kK3, 22));
    EXPECT_EQ(read_config(packed), read_config(q));   // quantize writes the published block, in text_config
    WeightStore a(packed, WeightMemory::kMmap), b(q, WeightMemory::kMmap);
    const auto ta = a.all_tensors(), tb = b.all_tensors();
    ASSERT_EQ(ta.size(), tb.size());
    for (size_t i = 0; i < ta.size(); ++i) {
        ASSERT_EQ(ta[i].first, tb[i].first);
        ASSERT_EQ(ta[i].second.dtype, tb[i].second.dtype) << ta[i].first;
        ASSERT_EQ(ta[i].second.nbytes(), tb[i].second.nbytes()) << ta[i].first;
        EXPECT_EQ(0, std::memcmp(ta[i].second.data, tb[i].second.data, ta[i].second.nbytes())) << ta[i].first;
    }
    // Kimi Linear: the block at the top level; other targets keep the explicit ignore list
    const nlohmann::json kl = read_config(test::make_model("tiny", {}, 23, true));
    EXPECT_EQ(kl["quantization_config"], nlohmann::json::parse(published_k3_quant_config().dump()));
    const nlohmann::json all = read_config(test::quantized(test::make_model("k3-tiny", kK3, 22), "all-linear"));
    const auto& ignore = all["text_config"]["quantization_config"]["ignore"];
    EXPECT_NE(std::find(ignore.begin(), ignore.end(), "language_model.model.layers.1.block_sparse_moe.gate"),
              ignore.end());
}

TEST(Mxfp4Published, CrossCheckErrors) {
    const std::string expert = "language_model.model.layers.1.block_sparse_moe.experts.2.w1";
    {   // a packed module the config ignores: names the tensor and the config's entry
        const std::string d = test::make_model("k3-tiny", kK3, 24, true);
        edit_config(d, [](nlohmann::json& j) {
            j["text_config"]["quantization_config"]["ignore"].push_back("re:.*experts\\.2\\.");
        });
        expect_load_error(d, "tensor '" + expert + ".weight_packed' is stored as MXFP4");
        expect_load_error(d, "text_config.quantization_config ignores it (entry 're:.*experts\\.2\\.')");
    }
    {   // a packed module no target names
        const std::string d = test::make_model("k3-tiny", kK3, 24, true);
        edit_config(d, [](nlohmann::json& j) {
            j["text_config"]["quantization_config"]["config_groups"]["group_0"]["targets"] = {
                "re:.*experts\\.[013]\\."};
        });
        expect_load_error(d, "none of the targets of ");
        expect_load_error(d, "config.json: text_config.quantization_config matches it");
    }
    {   // packed tensors without any quantization_config
        const std::string d = test::make_model("k3-tiny", kK3, 24, true);
        edit_config(d, [](nlohmann::json& j) { j["text_config"].erase("quantization_config"); });
        expect_load_error(d, "it has no quantization_config");
    }
    {   // both forms of one module
        const std::string d = test::make_model("k3-tiny", kK3, 24, true);
        int64_t rows = 0, cols = 0;
        rewrite_tensors(d, [&](SafetensorsWriter::Entry& e) {
            if (e.name == expert + ".weight_packed") rows = e.shape[0], cols = e.shape[1] * 2;
            return true;
        });
        ASSERT_GT(rows, 0);
        rewrite_tensors(
            d, [](SafetensorsWriter::Entry&) { return true; },
            {{{expert + ".weight", DType::kBF16, {rows, cols}}, std::vector<uint8_t>(size_t(rows * cols * 2))}});
        expect_load_error(d, "module '" + expert + "' is stored twice");
    }
}

}   // namespace
}   // namespace kimi
