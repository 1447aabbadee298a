// MXFP4 checkpoints: the compressed-tensors rounding rule on its edge cases, `quantize`
// round trips (targeted linears within the rounding bound, everything else byte-identical),
// loading K3 and Kimi Linear directories with MXFP4 experts, and the loader's errors (missing
// or misshapen scales, widths not divisible by 32, ignore regexes, unsupported formats).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "model/kimi_model.h"
#include "checkpoint/mxfp4_quantize.h"
#include "checkpoint_make/quantize_checkpoint.h"
#include "checkpoint/safetensors_writer.h"
#include "runtime/sequence_driver.h"
#include "checkpoint/weight_store.h"
#include "checkpoint_edit.h"
#include "test_models.h"

namespace kimi {
namespace {

float bf16v(float v) { return round_to_bf16(v); }

TEST(Mxfp4Rounding, E2M1NearestEvenSaturating) {
    struct Case {
        float v;
        uint8_t nibble;
    };
    const Case cases[] = {
        {0.0f, 0},     {0.25f, 0},  {0.26f, 1},   {0.5f, 1},    {0.74f, 1},   {0.75f, 2},
        {1.0f, 2},     {1.25f, 2},  {1.26f, 3},   {1.5f, 3},    {1.75f, 4},   {2.5f, 4},
        {2.52f, 5},    {3.0f, 5},   {3.5f, 6},    {5.0f, 6},    {5.0001f, 6},   // rounds to bf16 5.0 first (cast_to_fp4 works on bf16): a tie, to 4
        {5.03125f, 7}, {6.0f, 7},   {6.9f, 7},    {1e30f, 7},   // saturates at 6
        {-0.1f, 8},                                             // negative, rounds to 0: keeps the sign bit (−0)
        {-0.5f, 9},    {-6.0f, 15}, {-1e30f, 15}, {-1.75f, 12},
    };
    for (const auto& c : cases) EXPECT_EQ(int(e2m1_nibble(c.v)), int(c.nibble)) << c.v;
    // every nibble decodes back to itself
    for (uint8_t n = 0; n < 16; ++n)
        if (n != 8) {
            EXPECT_EQ(int(e2m1_nibble(e2m1_to_f32(n))), int(n));
        }
    EXPECT_EQ(bf16v(5.0001f), 5.0f);
}

TEST(Mxfp4Rounding, ScaleFromTheGroupMaximum) {
    EXPECT_EQ(mxfp4_scale_byte(0.0f), 0);                      // all-zero group
    EXPECT_EQ(mxfp4_scale_byte(1.0f), 125);                    // p = 1: 127 + 0 − 2
    EXPECT_EQ(mxfp4_scale_byte(6.0f), 127);                    // 1.5·2^2 → p = 4 → scale 1: 6 stays 6
    EXPECT_EQ(mxfp4_scale_byte(1.74f * 4.0f), 127);            // m < 1.75 keeps the exponent
    EXPECT_EQ(mxfp4_scale_byte(1.75f * 4.0f), 128);            // m ≥ 1.75 rounds up to 8
    EXPECT_EQ(mxfp4_scale_byte(std::ldexp(1.0f, -130)), 0);    // subnormal: clamped to the smallest scale
    EXPECT_EQ(mxfp4_scale_byte(std::ldexp(1.0f, -120)), 5);    // 127 − 120 − 2
    EXPECT_EQ(mxfp4_scale_byte(std::ldexp(1.0f, 127)), 252);   // huge
    EXPECT_EQ(mxfp4_scale_byte(std::ldexp(1.9f, 127)), 254);   // rounds past the largest exponent: clamped
}

TEST(Mxfp4Rounding, GroupsRoundTripWithinTheBound) {
    Rng rng(41);
    float w[kMxfp4Group];
    uint8_t packed[16], scale = 0;
    for (int it = 0; it < 2000; ++it) {
        const double mag = std::ldexp(1.0, int(rng.below(40)) - 30);
        for (auto& v : w) v = bf16v(float(rng.normal() * mag));
        if (it % 97 == 0)
            for (auto& v : w) v = 0.0f;
        mxfp4_quantize_group(w, packed, &scale);
        const float s = e8m0_to_f32(scale);
        for (int i = 0; i < int(kMxfp4Group); ++i) {
            const float d = mxfp4_element(packed, &scale, i);
            // half the widest E2M1 gap (2 → 1), or the saturation from 6 to < 7: at most one scale unit
            ASSERT_LE(std::fabs(d - w[i]), s * 1.0f + 1e-30f)
                << "w " << w[i] << " got " << d << " scale byte " << int(scale);
        }
        if (it % 97 == 0) {
            EXPECT_EQ(scale, 0);
            for (uint8_t b : packed) EXPECT_EQ(b, 0);
        }
    }
}

using test::edit_config;
using test::expect_load_error;
using test::quantized;
using test::rewrite_tensors;

TEST(Mxfp4Checkpoint, QuantizedK3LoadsWithMxfp4Experts) {
    const std::string src = test::make_model("k3-tiny", {"text_config.routed_expert_hidden_size=64"}, 7);
    const std::string q = quantized(src);
    auto m = KimiModel::load(q);
    ASSERT_TRUE(m->config().quant.mxfp4);
    const auto& moe = m->weights().layers[1].moe;
    EXPECT_EQ(moe.experts[0].gate.dtype, DType::kMXFP4);
    EXPECT_EQ(moe.experts[0].down.dtype, DType::kMXFP4);
    EXPECT_NE(moe.shared.gate.dtype, DType::kMXFP4);   // shared experts stay (--targets experts)
    EXPECT_NE(m->weights().lm_head.dtype, DType::kMXFP4);
    EXPECT_GT(m->store().mxfp4_bytes(), 0u);
    // Round trip: every quantized weight within the rounding bound of the original; every other
    // tensor byte-identical.
    WeightStore a(src, WeightMemory::kMmap), b(q, WeightMemory::kMmap);
    std::map<std::string, Tensor> out;
    for (const auto& [n, t] : b.all_tensors()) out[n] = t;
    int n_quantized = 0;
    for (const auto& [name, t] : a.all_tensors()) {
        const std::string module = name.size() > 7 ? name.substr(0, name.size() - 7) : name;
        if (out.count(module + ".weight_packed")) {
            ++n_quantized;
            const Tensor& p = out[module + ".weight_packed"];
            const Tensor& s = out[module + ".weight_scale"];
            ASSERT_EQ(p.dim(0), t.dim(0));
            ASSERT_EQ(p.dim(1) * 2, t.dim(1));
            for (int64_t e = 0; e < t.numel(); ++e) {
                const uint8_t sb = static_cast<const uint8_t*>(s.data)[e / kMxfp4Group];
                const float d =
                    mxfp4_element(static_cast<const uint8_t*>(p.data), static_cast<const uint8_t*>(s.data), e);
                ASSERT_LE(std::fabs(d - element_f32(t, e)), e8m0_to_f32(sb)) << name << " element " << e;
            }
        } else {
            ASSERT_TRUE(out.count(name)) << name;
            ASSERT_EQ(out[name].nbytes(), t.nbytes());
            EXPECT_EQ(0, std::memcmp(out[name].data, t.data, t.nbytes())) << name;
        }
    }
    EXPECT_GT(n_quantized, 0);
    // and it runs, batch- and chunk-invariant like any checkpoint
    test::Runner r(2);
    const auto toks = test::random_tokens(13, m->config().vocab_size, 5);
    const auto whole = score_sequence(*m, r.ex, toks, {}), chunked = score_sequence(*m, r.ex, toks, {4, 1, 8});
    EXPECT_EQ(0, std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)));
}

TEST(Mxfp4Checkpoint, QuantizedKimiLinearAllLinearsRuns) {
    const std::string q = quantized(test::make_model("tiny", {}, 8), "all-linear");
    auto m = KimiModel::load(q);
    EXPECT_EQ(m->weights().layers[0].kda.q_proj.dtype, DType::kMXFP4);
    EXPECT_EQ(m->weights().lm_head.dtype, DType::kMXFP4);
    test::Runner r(1, Precision::kBF16);
    const auto logits = score_sequence(*m, r.ex, test::random_tokens(9, m->config().vocab_size, 6), {});
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(Mxfp4Checkpoint, IgnoreRegexKeepsModulesAsStored) {
    // A config that ignores the attention by regex instead of by name still loads (those linears
    // are stored unquantized), and one that ignores a quantized expert fails naming the tensor.
    const std::string q = quantized(test::make_model("tiny", {}, 9));
    edit_config(q, [](nlohmann::json& j) {
        nlohmann::json keep =
            nlohmann::json::array({"re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\..*", "lm_head"});
        j["quantization_config"]["ignore"] = keep;
    });
    EXPECT_NO_THROW(KimiModel::load(q));
    edit_config(q, [](nlohmann::json& j) {
        j["quantization_config"]["ignore"].push_back("re:model\\.layers\\.1\\.block_sparse_moe\\.experts\\.0\\.");
    });
    expect_load_error(q, "model.layers.1.block_sparse_moe.experts.0.w1.weight");
}

TEST(Mxfp4Checkpoint, LoaderErrors) {
    const std::string src = test::make_model("tiny", {}, 10);
    {   // a missing scale
        const std::string q = quantized(src);
        rewrite_tensors(q, [](SafetensorsWriter::Entry& e) {
            return e.name != "model.layers.1.block_sparse_moe.experts.2.w3.weight_scale";
        });
        expect_load_error(q, "missing tensor 'model.layers.1.block_sparse_moe.experts.2.w3.weight_scale'");
    }
    {   // a scale of the wrong shape
        const std::string q = quantized(src);
        rewrite_tensors(q, [](SafetensorsWriter::Entry& e) {
            if (e.name == "model.layers.1.block_sparse_moe.experts.2.w3.weight_scale") e.shape[1] += 1;
            return true;
        });
        expect_load_error(q, "experts.2.w3.weight_scale': shape");
    }
    {   // a packed tensor stored as a float dtype
        const std::string q = quantized(src);
        rewrite_tensors(q, [](SafetensorsWriter::Entry& e) {
            if (e.name == "model.layers.1.block_sparse_moe.experts.0.w1.weight_packed")
                e.dtype = DType::kBF16, e.shape[1] /= 2;
            return true;
        });
        expect_load_error(q, "expected U8 (MXFP4)");
    }
    {   // a module stored as MXFP4 whose input width is not a multiple of 32
        const std::string odd =
            quantized(test::make_model("tiny", {"moe_intermediate_size=48"}, 11));   // w2 stays BF16
        const std::string w2 = "model.layers.1.block_sparse_moe.experts.0.w2";
        int64_t rows = 0;
        rewrite_tensors(odd, [&](SafetensorsWriter::Entry& e) {
            if (e.name == w2 + ".weight") rows = e.shape[0];
            return e.name != w2 + ".weight";
        });
        rewrite_tensors(odd, [](SafetensorsWriter::Entry&) { return true; },
                        {{{w2 + ".weight_packed", DType::kU8, {rows, 24}}, std::vector<uint8_t>(size_t(rows * 24))},
                         {{w2 + ".weight_scale", DType::kU8, {rows, 1}}, std::vector<uint8_t>(size_t(rows), 127)}});
        edit_config(odd, [&](nlohmann::json& j) { j["quantization_config"]["ignore"] = nlohmann::json::array(); });
        expect_load_error(odd, "input width 48 is not a multiple of 32");
    }
    // unsupported schemes, each named
    const auto with_group = [&](const nlohmann::json& group, const std::string& needle) {
        const std::string d = test::make_model("tiny", {}, 12);
        edit_config(d, [&](nlohmann::json& j) {
            j["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                        {"config_groups", {{"group_0", group}}}};
        });
        expect_load_error(d, needle);
    };
    const nlohmann::json w4 = {{"num_bits", 4}, {"type", "float"}, {"strategy", "group"}, {"group_size", 32}};
    with_group({{"format", "nvfp4-pack-quantized"}, {"targets", {"Linear"}}, {"weights", w4}},
               "format 'nvfp4-pack-quantized' is not supported");
    with_group({{"format", "pack-quantized"}, {"targets", {"Linear"}}, {"weights", w4}}, "format 'pack-quantized'");
    with_group({{"format", "float-quantized"}, {"targets", {"Linear"}}, {"weights", w4}}, "format 'float-quantized'");
    nlohmann::json w16 = w4;
    w16["group_size"] = 16;
    with_group({{"format", "mxfp4-pack-quantized"}, {"targets", {"Linear"}}, {"weights", w16}}, "group_size: 16");
    with_group({{"format", "mxfp4-pack-quantized"},
                {"targets", {"Linear"}},
                {"weights", w4},
                {"input_activations", {{"num_bits", 8}}}},
               "activation quantization is not supported");
    with_group({{"format", "mxfp4-pack-quantized"}, {"targets", {"re:(unclosed"}}, {"weights", w4}},
               "invalid regular expression");
    // found by fuzz_safetensors' author: std::regex recursed per group (a stack overflow at ~10,000
    // levels) and backtracked exponentially on a repeated group holding a repetition (> 30 s a module)
    with_group({{"format", "mxfp4-pack-quantized"}, {"targets", {"re:(.*)*(.*)*(.*)*@"}}, {"weights", w4}},
               "holds a repetition itself");
    with_group({{"format", "mxfp4-pack-quantized"},
                {"targets", {"re:" + std::string(40, '(') + "a" + std::string(40, ')')}},
                {"weights", w4}},
               "nested deeper than 32 levels");
}

}   // namespace
}   // namespace kimi
