// The attention output contract: KDA and MLA return the very tensor their o_proj wrote, and
// the decoder layer adds that tensor into the residual (direct mode); copy mode adds a copy
// and counts it. A steady-state decode step performs no heap allocation. Every test runs on
// Kimi Linear and on Kimi-K3 (full-rank KDA gate, gated q-LoRA MLA, Block AttnRes decoder,
// where a block boundary adds the returned tensor into a fresh partial sum).
#include <gtest/gtest.h>

#include <cstring>

#include "model/layers/kda_attention.h"
#include "model/layers/mla_attention.h"
#include "test_models.h"

namespace kimi {
namespace {

struct OneSeq {
    std::vector<int32_t> ids, starts{0, 0}, past{0}, slots{0}, tables{0, 1, 2, 3}, rows;
    ForwardBatch batch(int64_t n_tokens, int64_t n_done) {
        ids = test::random_tokens(n_tokens, 1280, 5 + uint64_t(n_done));
        starts = {0, int32_t(n_tokens)};
        past = {int32_t(n_done)};
        rows = {int32_t(n_tokens - 1)};
        return ForwardBatch{ids, starts, past, slots, tables, 4, rows};
    }
};

class Ownership : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override { model = KimiModel::load(test::make_model(GetParam(), {}, 3)); }
    std::unique_ptr<KimiModel> model;
};

TEST_P(Ownership, KdaReturnsItsOprojOutput) {
    test::Runner r(2);
    CacheStorage cache(model->cache_geometry(1, 4));
    OneSeq s;
    const ForwardBatch b = s.batch(5, 0);
    LayerContext lc{r.ex, model->config(), b, cache, ops::SeqLayout{b.seq_starts, b.state_slots}};
    Tensor x = r.arena.alloc_f32({5, model->config().hidden_size});
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = float(i % 7) * 0.1f;
    const LayerWeights& l0 = model->weights().layers[0];
    ASSERT_EQ(l0.kind, LayerKind::kKda);
    const Tensor out = kda_attention_forward(lc, l0.kda, 0, x);
    EXPECT_NE(out.data, nullptr);
    EXPECT_EQ(out.data, r.ex.trace.o_proj_output);
    EXPECT_EQ(out.dim(0), 5);
    EXPECT_EQ(out.dim(1), model->config().hidden_size);
}

TEST_P(Ownership, MlaReturnsItsOprojOutput) {
    test::Runner r(2);
    CacheStorage cache(model->cache_geometry(1, 4));
    OneSeq s;
    const ForwardBatch b = s.batch(6, 0);
    LayerContext lc{r.ex, model->config(), b, cache, ops::SeqLayout{b.seq_starts, b.state_slots}};
    Tensor x = r.arena.alloc_f32({6, model->config().hidden_size});
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = float(i % 5) * 0.1f;
    const LayerWeights& l3 = model->weights().layers[3];
    ASSERT_EQ(l3.kind, LayerKind::kMla);
    const Tensor out = mla_attention_forward(lc, l3.mla, 0, x);
    EXPECT_EQ(out.data, r.ex.trace.o_proj_output);
}

TEST_P(Ownership, DecoderLayerAddsTheReturnedTensor) {
    for (int64_t layer : {0, 3}) {   // a KDA and an MLA layer
        for (AttnOutputMode mode : {AttnOutputMode::kDirect, AttnOutputMode::kCopy}) {
            test::Runner r(2, Precision::kF32, mode);
            CacheStorage cache(model->cache_geometry(1, 4));
            OneSeq s;
            const ForwardBatch b = s.batch(4, 0);
            KimiModel::Residual res = model->new_residual(r.ex, 4);
            for (int64_t i = 0; i < res.partial.numel(); ++i) res.partial.f32()[i] = float(i % 3) - 1.0f;
            model->layer_forward(r.ex, b, cache, layer, res);
            if (mode == AttnOutputMode::kDirect) {
                EXPECT_EQ(r.ex.trace.residual_addend, r.ex.trace.o_proj_output) << "layer " << layer;
                EXPECT_EQ(r.ex.counters.attn_output_copies, 0);
            } else {
                EXPECT_NE(r.ex.trace.residual_addend, r.ex.trace.o_proj_output) << "layer " << layer;
                EXPECT_EQ(r.ex.counters.attn_output_copies, 1);
            }
        }
    }
}

TEST_P(Ownership, CountersPerStep) {
    const int64_t n_layers = model->config().n_layers;
    for (AttnOutputMode mode : {AttnOutputMode::kDirect, AttnOutputMode::kCopy}) {
        test::Runner r(2, Precision::kBF16, mode);
        CacheStorage cache(model->cache_geometry(1, 4));
        OneSeq s;
        r.arena.reset();
        model->forward(r.ex, s.batch(8, 0), cache);   // prefill
        for (int step = 0; step < 6; ++step) {        // decode steps
            r.arena.reset();
            ForwardBatch b = s.batch(1, 8 + step);
            model->forward(r.ex, b, cache);
            EXPECT_EQ(r.ex.counters.attn_output_copies, mode == AttnOutputMode::kDirect ? 0 : n_layers);
            if (step >= 2) {
                EXPECT_EQ(r.ex.counters.heap_allocations, 0) << "steady-state decode step " << step;
                EXPECT_EQ(r.ex.counters.page_faults, 0) << "steady-state decode step " << step;
            }
        }
    }
}

TEST_P(Ownership, DirectAndCopyAreBitIdentical) {
    std::vector<std::vector<float>> out;
    for (AttnOutputMode mode : {AttnOutputMode::kDirect, AttnOutputMode::kCopy}) {
        test::Runner r(2, Precision::kBF16, mode);
        CacheStorage cache(model->cache_geometry(1, 4));
        OneSeq s;
        const Tensor l = model->forward(r.ex, s.batch(20, 0), cache);
        out.emplace_back(l.f32(), l.f32() + l.numel());
    }
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Models, Ownership, ::testing::Values("tiny", "k3-tiny"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                             return i.param[0] == 'k' ? "K3Tiny" : "Tiny";
                         });

}   // namespace
}   // namespace kimi
