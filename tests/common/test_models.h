// Helpers for tests that need a model: random checkpoints in a temp dir, a ready Exec.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "model/kimi_model.h"

namespace kimi::test {

// A fresh temporary directory, removed (with its contents) when the test process exits.
std::string temp_dir(const std::string& tag);

// Writes a random checkpoint from `preset` with `sets` overrides; returns its directory.
// mxfp4_experts: the routed experts in the published MXFP4 form (make-model --mxfp4-experts).
std::string make_model(const std::string& preset, const std::vector<std::string>& sets, uint64_t seed,
                       bool mxfp4_experts = false);

struct Runner {
    explicit Runner(int threads, Precision p = Precision::kF32, AttnOutputMode m = AttnOutputMode::kDirect)
        : pool(threads), arena() {
        ex.pool = &pool;
        ex.arena = &arena;
        ex.layer_arena = &layer_arena;
        ex.precision = p;
        ex.attn_output = m;
    }
    ThreadPool pool;
    Arena arena, layer_arena;
    Exec ex;
};

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed);

}   // namespace kimi::test
