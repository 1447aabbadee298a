// ForwardBatch: everything one forward step needs to know about its sequences, passed
// explicitly (no global context). Integers only; built by the runner (or `score`).
#pragma once
#include <cstdint>
#include <span>

#include "backend/op_params.h"

namespace kimi {

struct ForwardBatch {
    std::span<const int32_t> token_ids;      // [T]   all scheduled tokens, sequence after sequence
    std::span<const int32_t> seq_starts;     // [B+1] tokens of sequence b: [seq_starts[b], seq_starts[b+1])
    std::span<const int32_t> n_past;         // [B]   tokens of sequence b already in the cache
    std::span<const int32_t> state_slots;    // [B]   KDA state slot of sequence b
    std::span<const int32_t> block_tables;   // [B, max_blocks] MLA cache blocks of sequence b
    int32_t max_blocks = 0;
    std::span<const int32_t> logit_rows;                // [R]   token rows whose logits are wanted
    std::span<const ops::StateCapture> captures = {};   // KDA state copies mid-sequence (prefix cache)
    // Image tokens (K3 vision): row embed_rows[i] of the batch takes embed_values[i·D, (i+1)·D)
    // (the projector's output) instead of its token's embedding.
    std::span<const int32_t> embed_rows = {};   // [E] ascending token rows
    std::span<const float> embed_values = {};   // [E, D]
};

}   // namespace kimi
