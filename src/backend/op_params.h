// Parameter structs of the ops (op_table.h): how per-sequence state, sequence spans, the
// paged latent cache and MoE routing options are described to a kernel. Integers and
// pointers only; they live here so backend kernels need nothing above the backend layer.
#pragma once
#include <cstdint>
#include <span>

namespace kimi::ops {

// Per-sequence recurrent state addressed by slot: slot s lives at base + s * slot_stride.
struct SlotState {
    float* base = nullptr;
    int64_t slot_stride = 0;   // floats
};

// A copy of sequence `seq`'s recurrent state (KDA state and conv windows) as it stands after
// its first `t` tokens of this step (0 < t < its token count), written to slot `slot`: the
// prefix cache's checkpoints at positions inside a prefill chunk, at no extra step.
struct StateCapture {
    int32_t seq = 0, t = 0, slot = 0;
};

// Token spans of the sequences in a step: tokens of sequence b are [seq_starts[b], seq_starts[b+1]).
struct SeqLayout {
    std::span<const int32_t> seq_starts;           // [B+1]
    std::span<const int32_t> slots;                // [B] recurrent-state slot of each sequence
    std::span<const StateCapture> captures = {};   // ordered by (seq, t)
};

// Paged latent cache of one MLA layer: token p of a sequence sits in block
// block_table[p / block_size], row p % block_size; each row holds [c (R) ; k_rope (P)],
// as f32 (base) or as bf16 bits (base_bf16, rounded to nearest even when written).
struct PagedLatents {
    float* base = nullptr;           // [n_blocks, block_size, R + P] f32, or
    uint16_t* base_bf16 = nullptr;   // the same as bf16 (exactly one of the two is set)
    int32_t block_size = 0;
    int64_t row_width = 0;                   // R + P
    std::span<const int32_t> block_tables;   // [B, max_blocks]
    int32_t max_blocks = 0;
};

// MoE routing options (see ops::moe_route).
struct RouteParams {
    int32_t top_k = 1, n_groups = 1, topk_groups = 1;
    bool renormalize = true;
    float scale = 1.0f;
};

}   // namespace kimi::ops
