// StepTraffic: what one forward step must move, from the loaded weights and the config —
// the weight bytes read (dense weights, the router, the experts the batch selects: with
// uniform routing a batch of B tokens touches E·(1 − (1 − k/E)^B) of E experts, plus the
// shared ones), the cache bytes (each sequence's KDA state read and written, its MLA latents
// for the context), and the multiply-adds per token. The roofline of a decode step is
// bytes / read bandwidth.
#pragma once
#include <cstdint>

#include "model/kimi_model.h"

namespace kimi {

struct StepTraffic {
    double weight_bytes = 0;     // weights read once per step
    double cache_bytes = 0;      // KDA state (read + write) + MLA latents read
    double macs_per_token = 0;   // weight multiply-adds per token (matrix products)
    double head_macs = 0;        // of which lm_head: a prefill pays it for its last token only
    double total_bytes() const { return weight_bytes + cache_bytes; }
};

// A decode step of `batch` sequences, each with `context` tokens already cached.
// latent_bf16: the MLA cache holds bf16 latents (half the cache bytes).
StepTraffic decode_step_traffic(const KimiModel& m, int64_t batch, int64_t context, bool latent_bf16 = false);
// Multiply-adds of the attention itself (not its projections) for `n_tokens` prompt tokens
// that follow `context` cached ones: the absorbed MLA attention scores every cached and
// causal position over the latent and rope widths and sums the latents back, per head; the
// KDA recurrence reads, updates and applies each head's K × V state (3 K·V per token).
double attention_macs(const KimiModel& m, int64_t n_tokens, int64_t context);
// Bytes of every weight this process holds (its slices when the model is split).
double held_weight_bytes(const KimiModel& m);

}   // namespace kimi
