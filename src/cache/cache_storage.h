// CacheStorage: the tensors behind the hybrid cache (bookkeeping lives elsewhere).
//   KDA layer l: recurrent state [n_slots, H, K, V] f32 and conv windows
//                [n_slots, 3 (q, k, v), W-1, H*K] f32 (raw pre-conv projections).
//   MLA layer l: paged latents [n_blocks, block_size, R + P] f32 or bf16 (normed c ; k_rope).
// A sequence owns one state slot (shared by all KDA layers) and a block table (shared by
// all MLA layers). Slots past the running ones hold the prefix cache's KDA checkpoints.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/op_params.h"

namespace kimi {

struct CacheGeometry {
    int64_t n_kda_layers = 0, kda_heads = 0, kda_head_dim = 0, conv_kernel = 0;
    int64_t n_mla_layers = 0, latent_width = 0;
    int32_t n_slots = 0, n_blocks = 0, block_size = 16;
    bool latent_bf16 = false;   // --kv-cache-dtype bf16: half the MLA cache bytes

    int64_t state_floats_per_slot() const { return kda_heads * kda_head_dim * kda_head_dim; }
    int64_t conv_floats_per_slot() const { return 3 * (conv_kernel - 1) * kda_heads * kda_head_dim; }
    int64_t bytes_per_slot() const { return 4 * n_kda_layers * (state_floats_per_slot() + conv_floats_per_slot()); }
    int64_t bytes_per_block() const { return (latent_bf16 ? 2 : 4) * n_mla_layers * block_size * latent_width; }
};

// A change to a state slot outside a forward pass: src ≥ 0 copies slot src into dst, src < 0
// zeroes dst. Logged for the other ranks of a split model, which keep their own heads' state.
struct SlotOp {
    int32_t src = -1, dst = 0;
};

class CacheStorage {
public:
    explicit CacheStorage(const CacheGeometry& g);

    const CacheGeometry& geometry() const { return g_; }
    ops::SlotState kda_state(int64_t kda_layer);
    ops::SlotState conv_state(int64_t kda_layer, int which);   // which: 0 q, 1 k, 2 v
    ops::PagedLatents mla_latents(int64_t mla_layer);          // base (or base_bf16) and row geometry; tables unset
    void reset_slot(int32_t slot);                             // zero state + conv windows: a fresh sequence
    // A slot's whole recurrent state (every KDA layer's state and conv windows) copied into
    // another slot: prefix-cache checkpoints are slots too (saved and restored by copy).
    void copy_slot(int32_t src, int32_t dst);
    // Appends every reset_slot / copy_slot from now on to `log` (null: stop).
    void log_slot_ops(std::vector<SlotOp>* log) { log_ = log; }
    void apply(const SlotOp& op) { op.src < 0 ? reset_slot(op.dst) : copy_slot(op.src, op.dst); }
    int64_t bytes() const;

private:
    CacheGeometry g_;
    std::vector<std::unique_ptr<float[]>> state_, conv_, mla_;
    std::vector<std::unique_ptr<uint16_t[]>> mla_bf16_;
    std::vector<SlotOp>* log_ = nullptr;
};

}   // namespace kimi
