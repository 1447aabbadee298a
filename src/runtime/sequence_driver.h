// SequenceDriver: runs a fixed set of token sequences through the model in forward steps
// of a given shape — the scored sequence fed in chunks or token by token, others
// ("fillers") alongside it — with its own cache (one state slot per sequence, MLA blocks
// handed out from a shuffled pool so paging is exercised). Used by `kimi-cpp score` and
// the invariance tests; the serving runtime has its own scheduler and cache manager.
#pragma once
#include <cstdint>
#include <vector>

#include "model/kimi_model.h"

namespace kimi {

struct DriveOptions {
    int64_t prefill_chunk = 0;   // tokens per step while prefilling (0: the whole prefill in one step)
    int64_t decode_from = -1;    // from this position on, one token per step (-1: never)
    int64_t n_fillers = 0;       // other sequences in the same steps
    uint64_t filler_seed = 1234;
};

// Rows of the scored sequence whose input embedding is given (K3 image tokens): positions
// ascending, values [positions, D].
struct InputRows {
    std::vector<int32_t> positions;
    std::vector<float> values;
};

// Returns the logits of every position of `tokens`, [T, vocab] row-major.
std::vector<float> score_sequence(const KimiModel& model, Exec& ex, const std::vector<int32_t>& tokens,
                                  const DriveOptions& opt, const InputRows& input_rows = {});

}   // namespace kimi
