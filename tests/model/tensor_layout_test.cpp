// The tensor manifest is the one table (model/tensor_layout.h): every row is addressed by its
// slot, every text row says where a GGUF file holds it, the loader records what it keeps of
// each row, and the bytes a decode step reads (runtime/step_traffic.h), summed over the rows,
// equal the sum over the bound weights' fields written out by hand here. On Kimi Linear and on
// Kimi-K3 (vision tower, AttnRes, latent MoE, q-LoRA) configs.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "model/tensor_layout.h"
#include "runtime/step_traffic.h"
#include "test_models.h"

namespace kimi {
namespace {

class Manifest : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override { dir = test::make_model(GetParam(), {}, 7); }
    std::string dir;
};

TEST_P(Manifest, EverySlotFindsItsRowAndOnlyIt) {
    const ModelConfig c = load_model_config(dir);
    const TensorLayout layout(c);
    ASSERT_FALSE(layout.rows().empty());
    for (const TensorRow& r : layout.rows()) {
        const TensorRow* found = layout.find(r.slot, r.layer, r.expert);
        ASSERT_EQ(found, &r) << r.name;
    }
    EXPECT_EQ(layout.find(Slot::kKdaQ, c.n_layers), nullptr) << "past the last layer";
    if (c.n_experts > 0) {
        int64_t moe = 0;
        while (!c.is_moe_layer(moe)) ++moe;
        EXPECT_EQ(layout.find(Slot::kExpertGate, moe, c.n_experts), nullptr) << "past the last expert";
        EXPECT_EQ(layout.find(Slot::kExpertDown, moe, c.n_experts - 1)->name,
                  "model.layers." + std::to_string(moe) + ".block_sparse_moe.experts." +
                      std::to_string(c.n_experts - 1) + ".w2.weight");
    }
}

TEST_P(Manifest, EveryTextRowHasItsGgufSource) {
    const TensorLayout layout(load_model_config(dir));
    std::map<std::string, std::vector<const TensorRow*>> by_gguf;
    for (const TensorRow& r : layout.rows()) {
        if (r.vision) {
            EXPECT_EQ(r.gguf_form, GgufForm::kNone) << r.name;
            continue;
        }
        ASSERT_NE(r.gguf_form, GgufForm::kNone) << r.name;
        if (r.layer >= 0) {   // a layer's tensors are llama.cpp's blk.L.*
            const std::string blk = "blk." + std::to_string(r.layer) + ".";
            EXPECT_EQ(r.gguf.compare(0, blk.size(), blk), 0) << r.name << " → " << r.gguf;
        } else {
            EXPECT_EQ(r.gguf.find("blk."), std::string::npos) << r.name << " → " << r.gguf;
        }
        by_gguf[r.gguf].push_back(&r);
        if (r.gguf_form == GgufForm::kSplitKvB) by_gguf[r.gguf_v].push_back(&r);
    }
    for (const auto& [name, rows] : by_gguf) {
        const GgufForm form = rows[0]->gguf_form;
        if (form == GgufForm::kStackedExpert) {   // one stack per layer and projection: experts 0 … E-1 in order
            for (size_t e = 0; e < rows.size(); ++e) EXPECT_EQ(rows[e]->expert, int64_t(e)) << name;
        } else if (form == GgufForm::kFusedAttnRes) {   // the norm and its projection
            ASSERT_EQ(rows.size(), 2u) << name;
            EXPECT_EQ(rows[0]->role, TensorRole::kNorm) << name;
            EXPECT_EQ(rows[1]->role, TensorRole::kLinear) << name;
        } else {
            EXPECT_EQ(rows.size(), 1u) << name << ": one GGUF tensor, one row";
        }
    }
    const std::vector<GgufSource> sources = layout.gguf_sources();
    size_t text_rows = 0;
    for (const TensorRow& r : layout.rows()) text_rows += !r.vision;
    EXPECT_EQ(sources.size(), text_rows);
}

// The weight bytes and products of one decode step, by the weights' fields.
double bytes_of(const Tensor& t) {
    return t.defined() ? double(t.nbytes()) + (t.dtype == DType::kMXFP4 ? double(t.numel()) / 32.0 : 0.0) : 0.0;
}

TEST_P(Manifest, StepTrafficOverTheRowsEqualsTheWeightsFields) {
    for (const bool mxfp4 : {false, true}) {
        const auto model = KimiModel::load(mxfp4 ? test::make_model(GetParam(), {}, 7, true) : dir);
        const ModelConfig& c = model->config();
        const ModelWeights& w = model->weights();
        EXPECT_EQ(w.held.size(), TensorLayout(c).rows().size());
        for (const int64_t batch : {1, 5}) {
            double bytes = bytes_of(w.lm_head) + bytes_of(w.final_norm) +
                double(batch) * double(w.embed.nbytes()) / double(w.embed.dim(0));
            const double p_read = c.n_experts > 0
                ? 1.0 - std::pow(1.0 - double(c.n_experts_per_token) / double(c.n_experts), double(batch))
                : 0.0;
            for (const LayerWeights& l : w.layers) {
                const KdaWeights& k = l.kda;
                const MlaWeights& a = l.mla;
                for (const Tensor* t : {&k.q_proj,        &k.k_proj,          &k.v_proj,        &k.f_a,
                                        &k.f_b,           &k.b_proj,          &k.g_a,           &k.g_b,
                                        &k.g_proj,        &k.o_proj,          &a.q_proj,        &a.q_a,
                                        &a.q_b,           &a.kv_a_c,          &a.kv_a_rope,     &a.w_uk_t,
                                        &a.w_uv,          &a.g_proj,          &a.o_proj,        &l.mlp.gate,
                                        &l.mlp.up,        &l.mlp.down,        &l.moe.router,    &l.moe.latent_down,
                                        &l.moe.latent_up, &l.moe.shared.gate, &l.moe.shared.up, &l.moe.shared.down})
                    bytes += bytes_of(*t);
                for (const MlpWeights& x : l.moe.experts)
                    bytes += p_read * (bytes_of(x.gate) + bytes_of(x.up) + bytes_of(x.down));
            }
            const StepTraffic t = decode_step_traffic(*model, batch, 0);
            EXPECT_NEAR(t.weight_bytes, bytes, 1e-9 * bytes) << GetParam() << " batch " << batch;
        }
        // What the model holds: every field of the text model, prepared buffers included.
        double held = bytes_of(w.embed) + bytes_of(w.final_norm) + bytes_of(w.output_res_score) +
            (w.lm_head.data != w.embed.data ? bytes_of(w.lm_head) : 0.0);
        for (const LayerWeights& l : w.layers) {
            const KdaWeights& k = l.kda;
            const MlaWeights& a = l.mla;
            for (const Tensor* t : {&l.attn_norm,
                                    &l.ffn_norm,
                                    &l.attn_res_score,
                                    &l.ffn_res_score,
                                    &k.q_proj,
                                    &k.k_proj,
                                    &k.v_proj,
                                    &k.q_conv,
                                    &k.k_conv,
                                    &k.v_conv,
                                    &k.f_a,
                                    &k.f_b,
                                    &k.dt_bias,
                                    &k.neg_exp_a,
                                    &k.b_proj,
                                    &k.g_a,
                                    &k.g_b,
                                    &k.g_proj,
                                    &k.o_norm,
                                    &k.o_proj,
                                    &a.q_proj,
                                    &a.q_a,
                                    &a.q_a_norm,
                                    &a.q_b,
                                    &a.g_proj,
                                    &a.kv_a_c,
                                    &a.kv_a_rope,
                                    &a.kv_a_norm,
                                    &a.w_uk_t,
                                    &a.w_uv,
                                    &a.o_proj,
                                    &l.mlp.gate,
                                    &l.mlp.up,
                                    &l.mlp.down,
                                    &l.moe.router,
                                    &l.moe.score_bias,
                                    &l.moe.latent_down,
                                    &l.moe.latent_norm,
                                    &l.moe.latent_up,
                                    &l.moe.shared.gate,
                                    &l.moe.shared.up,
                                    &l.moe.shared.down})
                held += bytes_of(*t);
            for (const MlpWeights& x : l.moe.experts) held += bytes_of(x.gate) + bytes_of(x.up) + bytes_of(x.down);
        }
        EXPECT_EQ(held_weight_bytes(*model), held) << GetParam();
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, Manifest, ::testing::Values("tiny", "k3-tiny"));

}   // namespace
}   // namespace kimi
