// EngineConfig: what an Engine is built with — threads, activation precision, batch limits,
// cache sizes and the prefix cache (docs/runtime.md). The commands fill it from the runtime
// flags; CacheSizing (cache_sizing.h) turns it into the cache's actual sizes.
#pragma once
#include <cstdint>

#include "backend/exec.h"
#include "runtime/speculative_config.h"

namespace kimi {

class KimiModel;

struct EngineConfig {
    int threads = 1;
    Precision precision = Precision::kBF16;
    AttnOutputMode attn_output = AttnOutputMode::kDirect;
    int32_t max_num_seqs = 8;
    int32_t max_num_batched_tokens = 256;
    // 0: the model's max_position_embeddings (4096 without one), capped by what the cache memory
    // (cache_memory_bytes, else a quarter of the memory available) holds for one sequence
    int32_t max_model_len = 0;
    int32_t block_size = 16;
    bool kv_cache_bf16 = false;   // MLA latents stored as bf16 (half the cache bytes)
    // MLA cache blocks: n_blocks if > 0 (tests); else as many as fit in cache_memory_bytes
    // after the KDA state slots; else (both 0) enough for max_num_seqs full-length sequences.
    int32_t n_blocks = 0;
    int64_t cache_memory_bytes = 0;
    // Prefix caching (docs/runtime.md): full MLA blocks named by the hash chain of their prefix;
    // KDA state checkpoints at every multiple of prefix_checkpoint_interval tokens (rounded up
    // to whole blocks; 0: kDefaultCheckpointInterval), at every prompt's last full block (and
    // the one before its last token), and at each sequence's latest full block past its prompt —
    // taken inside a step, so the
    // schedule is unchanged — kept in prefix_cache_memory_bytes (0: default_prefix_cache_bytes()).
    static constexpr int32_t kDefaultCheckpointInterval = 256;
    bool enable_prefix_caching = true;
    int32_t prefix_checkpoint_interval = 0;
    int64_t prefix_cache_memory_bytes = 0;
    // Speculative decoding (--speculative-config; docs/runtime.md#speculative): off unless set.
    // At most speculative_max_seqs sequences (0: max_num_seqs) speculate in one step, each with
    // k spare state slots for the captures its verification rolls back to.
    SpeculativeConfig speculative;
    int32_t speculative_max_seqs = 0;
    // The loaded draft of method draft_model (owned by the caller, outliving the engine): its
    // cache goes in the same pools as the target's (docs/runtime.md#draft-model).
    const KimiModel* draft_model = nullptr;
    // `bench model`'s verification rows only: every decoding request (up to the speculating
    // sequences) verifies a full draft of k tokens in every step, with no back-off (an ngram
    // draft shorter than k is padded with its last token), so that each step is a verification of
    // 1 + k tokens per sequence. Never set it for serving: the padding is a guess.
    bool speculative_full_drafts = false;
};

}   // namespace kimi
