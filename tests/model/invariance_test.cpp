// Batch invariance by design: the logits of a sequence are bit-identical however it is cut
// into forward steps (chunk sizes, prefill/decode split), whatever shares the steps
// (fillers), on 1 or 2 threads, and in direct or copy attention-output mode — in both
// activation precisions.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/sequence_driver.h"
#include "test_models.h"

namespace kimi {
namespace {

struct Variant {
    const char* name;
    DriveOptions drive;
    int threads;
    AttnOutputMode mode;
};

std::vector<float> run(const KimiModel& m, const std::vector<int32_t>& toks, Precision p, const Variant& v) {
    test::Runner r(v.threads, p, v.mode);
    return score_sequence(m, r.ex, toks, v.drive);
}

void expect_invariant(const std::string& dir, int64_t n_tokens) {
    auto model = KimiModel::load(dir);
    const auto toks = test::random_tokens(n_tokens, model->config().vocab_size, 7);
    const int64_t whole = n_tokens;
    const std::vector<Variant> variants = {
        {"chunk 1", {1, -1, 0, 1}, 2, AttnOutputMode::kDirect},
        {"chunk 7", {7, -1, 0, 1}, 2, AttnOutputMode::kDirect},
        {"chunk 16", {16, -1, 0, 1}, 2, AttnOutputMode::kDirect},
        {"decode from 0", {0, 0, 0, 1}, 2, AttnOutputMode::kDirect},
        {"prefill 13 then decode", {0, 13, 0, 1}, 2, AttnOutputMode::kDirect},
        {"chunk 5, decode from 31", {5, 31, 0, 1}, 2, AttnOutputMode::kDirect},
        {"3 fillers", {0, -1, 3, 11}, 2, AttnOutputMode::kDirect},
        {"15 fillers, chunk 7", {7, -1, 15, 12}, 2, AttnOutputMode::kDirect},
        {"6 fillers, decode from 20", {0, 20, 6, 13}, 2, AttnOutputMode::kDirect},
        {"1 thread", {0, -1, 0, 1}, 1, AttnOutputMode::kDirect},
        {"1 thread, 4 fillers, chunk 3", {3, -1, 4, 14}, 1, AttnOutputMode::kDirect},
        {"copy mode", {0, -1, 0, 1}, 2, AttnOutputMode::kCopy},
        {"copy mode, decode from 9, 2 fillers", {0, 9, 2, 15}, 2, AttnOutputMode::kCopy},
    };
    for (Precision p : {Precision::kF32, Precision::kBF16}) {
        const Variant base{"whole prompt", {whole, -1, 0, 1}, 2, AttnOutputMode::kDirect};
        const auto ref = run(*model, toks, p, base);
        for (const auto& v : variants) {
            const auto got = run(*model, toks, p, v);
            ASSERT_EQ(got.size(), ref.size());
            EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)))
                << v.name << " changed the logits (" << (p == Precision::kF32 ? "f32" : "bf16") << ")";
        }
    }
}

TEST(Invariance, TinyPreset) { expect_invariant(test::make_model("tiny", {}, 1), 45); }

TEST(Invariance, OddConfig) {
    // several MLA layers, v ≠ nope, odd head counts, top-3, two shared experts, groups
    expect_invariant(
        test::make_model("tiny",
                         {"num_hidden_layers=6", "linear_attn_config.kda_layers=[1,2,4,5]",
                          "linear_attn_config.full_attn_layers=[3,6]", "linear_attn_config.num_heads=3",
                          "num_attention_heads=5", "num_key_value_heads=5", "v_head_dim=12", "num_experts_per_token=3",
                          "num_shared_experts=2", "num_expert_group=2", "topk_group=1", "hidden_size=72"},
                         2),
        40);
}

TEST(Invariance, K3TinyPreset) { expect_invariant(test::make_model("k3-tiny", {}, 4), 45); }

TEST(Invariance, K3OddConfig) {
    // KDA heads ≠ MLA heads, odd q-LoRA and latent widths, AttnRes blocks of 3 over 7 layers
    // (a partial last block), two MLA layers, top-3 of 6, SiTU without the linear β
    expect_invariant(
        test::make_model(
            "k3-tiny",
            {"text_config.num_hidden_layers=7", "text_config.linear_attn_config.kda_layers=[1,2,4,5,7]",
             "text_config.linear_attn_config.full_attn_layers=[3,6]", "text_config.linear_attn_config.num_heads=3",
             "text_config.num_attention_heads=5", "text_config.q_lora_rank=20",
             "text_config.routed_expert_hidden_size=36", "text_config.attn_res_block_size=3",
             "text_config.num_experts=6", "text_config.num_experts_per_token=3",
             "text_config.activation_situ_linear_beta=null", "text_config.hidden_size=72"},
            5),
        40);
}

}   // namespace
}   // namespace kimi
