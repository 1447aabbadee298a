// A model split over the ranks of an MPI job (tensor parallel: heads, intermediate units and
// vocabulary rows; expert parallel: whole experts) computes the logits of the whole model:
// within 1e-5 (max-rel, f32) of one process holding everything, the same bits on every rank,
// and the same bits on every run — for Kimi Linear and Kimi-K3 shapes, over a prefill and
// decode steps. Run alone (a split of one: the very bits of the whole model) and under
// `mpirun -np 2` and `-np 3` (uneven splits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "dist/comm.h"
#include "model/kimi_model.h"
#include "test_models.h"

namespace kimi {
namespace {

// Logits [steps][vocab] of a 19-token prefill (its last row) and 3 greedy decode steps.
std::vector<std::vector<float>> run(const KimiModel& m) {
    test::Runner r(1, Precision::kF32);
    CacheStorage cache(m.cache_geometry(1, 4, 16));
    cache.reset_slot(0);
    const int64_t v = m.config().vocab_size;
    std::vector<int32_t> ids = test::random_tokens(19, v, 77);
    std::vector<std::vector<float>> out;
    int32_t past = 0;
    const std::vector<int32_t> tables{0, 1, 2, 3}, slots{0};
    for (int step = 0; step < 4; ++step) {
        const int32_t n = int32_t(ids.size());
        const std::vector<int32_t> starts{0, n}, pasts{past}, rows{n - 1};
        r.arena.reset();
        const Tensor logits = m.forward(r.ex, ForwardBatch{ids, starts, pasts, slots, tables, 4, rows}, cache);
        out.emplace_back(logits.f32(), logits.f32() + v);
        past += n;
        ids = {int32_t(std::max_element(out.back().begin(), out.back().end()) - out.back().begin())};
    }
    return out;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, double(std::fabs(a[i] - b[i])));
        scale = std::max(scale, double(std::fabs(b[i])));
    }
    return diff / std::max(scale, 1e-30);
}

void check_split(const char* preset, bool expert_parallel) {
    dist::Comm& c = dist::Comm::world();
    // heads for 3 ranks, split unevenly (KDA 4 → 2+1+1, MLA 5 → 2+2+1)
    const std::string k = std::string(preset).rfind("k3", 0) == 0 ? "text_config." : "";
    const std::string dir =
        test::make_model(preset, {k + "linear_attn_config.num_heads=4", k + "num_attention_heads=5"}, 11);
    const auto whole = run(*KimiModel::load(dir));
    const auto model = KimiModel::load(dir, {}, WeightMemory::kAuto, Shard{c.rank(), c.size(), expert_parallel});
    const auto split = run(*model), again = run(*model);
    ASSERT_EQ(split.size(), whole.size());
    for (size_t s = 0; s < split.size(); ++s) {
        const std::string what = std::string(preset) + (expert_parallel ? " EP" : " TP") + " step " +
            std::to_string(s) + " rank " + std::to_string(c.rank()) + "/" + std::to_string(c.size());
        EXPECT_LE(max_rel(split[s], whole[s]), 1e-5) << what;
        if (c.size() == 1) {
            EXPECT_EQ(split[s], whole[s]) << what;   // a split of one is the whole model
        }
        EXPECT_EQ(0, std::memcmp(split[s].data(), again[s].data(), split[s].size() * 4)) << what << ": a second run";
        std::vector<float> all;   // every rank's logits side by side: the same bits
        c.allgather(split[s], all);
        for (int r = 1; r < c.size(); ++r)
            EXPECT_EQ(0, std::memcmp(all.data() + size_t(r) * split[s].size(), all.data(), split[s].size() * 4))
                << what;
    }
}

TEST(TensorParallel, KimiLinearMatchesOneProcess) { check_split("tiny", false); }
TEST(TensorParallel, KimiK3MatchesOneProcess) { check_split("k3-tiny", false); }
TEST(ExpertParallel, KimiLinearMatchesOneProcess) { check_split("tiny", true); }
TEST(ExpertParallel, KimiK3MatchesOneProcess) { check_split("k3-tiny", true); }

}   // namespace
}   // namespace kimi
