// CacheSizing implementation (see cache_sizing.h).
#include "runtime/cache_sizing.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/human_bytes.h"
#include "core/mapped_file.h"
#include "dist/comm.h"

namespace kimi {

CacheSizing size_cache(const KimiModel& m, const EngineConfig& c) {
    if (c.max_num_seqs < 1) throw Error("max-num-seqs must be at least 1");
    if (c.max_num_batched_tokens < 1) throw Error("max-num-batched-tokens must be at least 1");
    if (c.block_size < 1 || c.block_size > 4096) throw Error("block-size must be in [1, 4096]");
    if (c.max_model_len < 0) throw Error("max-model-len must be positive");
    CacheSizing z;
    const int64_t model_max = m.config().max_position_embeddings;
    z.model_max_len = int32_t(std::clamp<int64_t>(model_max, 0, int64_t(1) << 24));
    z.max_len_given = c.max_model_len > 0;
    z.max_model_len = z.max_len_given ? c.max_model_len : model_max > 0 ? z.model_max_len : 4096;
    z.block_size = c.block_size;
    z.n_slots = c.max_num_seqs;
    const CacheGeometry g = m.cache_geometry(1, 1, c.block_size, c.kv_cache_bf16);
    z.slot_bytes = g.bytes_per_slot();
    z.block_bytes = g.bytes_per_block();
    if (c.draft_model && c.speculative.method == SpeculativeConfig::Method::kDraftModel) {
        const CacheGeometry d = c.draft_model->cache_geometry(1, 1, c.block_size, c.kv_cache_bf16);
        z.draft_slot_bytes = d.bytes_per_slot();
        z.draft_block_bytes = d.bytes_per_block();
    }
    const int64_t slot_all = z.slot_bytes + z.draft_slot_bytes, block_all = z.block_bytes + z.draft_block_bytes;
    if (c.prefix_checkpoint_interval < 0) throw Error("prefix-checkpoint-interval must be >= 0");
    if (c.prefix_cache_memory_bytes < 0) throw Error("prefix-cache-memory must be >= 0");
    z.prefix_caching = c.enable_prefix_caching;
    if (z.prefix_caching) {
        const int32_t want =
            c.prefix_checkpoint_interval > 0 ? c.prefix_checkpoint_interval : EngineConfig::kDefaultCheckpointInterval;
        z.checkpoint_interval = (want + c.block_size - 1) / c.block_size * c.block_size;
        const int64_t budget = c.prefix_cache_memory_bytes > 0
            ? c.prefix_cache_memory_bytes
            : default_prefix_cache_bytes(z.slot_bytes, c.max_num_seqs);
        const int64_t avail = int64_t(memory_available_bytes());
        if (avail > 0 && budget > avail)
            throw Error("prefix-cache-memory " + human_bytes(budget) + " is more than the memory available (" +
                        human_bytes(avail) + ")");
        // No recurrent layers: a checkpoint holds nothing (64 per sequence slot).
        z.n_checkpoints = int32_t(
            std::min<int64_t>(z.slot_bytes > 0 ? budget / z.slot_bytes : int64_t(c.max_num_seqs) * 64, 1 << 24));
    }
    // The default length: at most what the cache memory holds for one sequence beside the state
    // slots (--cache-memory, else a quarter of the memory available now).
    if (!z.max_len_given && c.n_blocks == 0 && block_all > 0) {
        const int64_t avail = int64_t(memory_available_bytes());
        const int64_t budget = c.cache_memory_bytes > 0 ? c.cache_memory_bytes : avail > 0 ? avail / 4 : 0;
        if (budget > 0) {
            const int64_t blocks = (budget - int64_t(z.n_slots) * slot_all) / block_all;
            const int64_t fits = std::max<int64_t>(blocks, 1) * c.block_size;
            z.max_model_len = int32_t(std::min<int64_t>(z.max_model_len, fits));
        }
    }
    // Never fewer blocks than one full-length sequence needs, so any admissible request fits alone.
    const int32_t one = (z.max_model_len + c.block_size - 1) / c.block_size;
    if (c.n_blocks > 0) {
        z.n_blocks = std::max(c.n_blocks, one);
    } else if (c.cache_memory_bytes > 0 && block_all > 0) {
        const int64_t for_blocks = c.cache_memory_bytes - int64_t(z.n_slots) * slot_all;
        const int64_t n = for_blocks > 0 ? for_blocks / block_all : 0;
        if (n < one)
            throw Error("cache-memory " + human_bytes(c.cache_memory_bytes) + " is too small: the KDA state of " +
                        std::to_string(z.n_slots) + " sequences (max-num-seqs) takes " +
                        human_bytes(int64_t(z.n_slots) * slot_all) + " and one max-model-len (" +
                        std::to_string(z.max_model_len) + ") sequence needs " + human_bytes(int64_t(one) * block_all) +
                        " of MLA cache; lower max-num-seqs or max-model-len, or give more");
        z.n_blocks = int32_t(std::min<int64_t>(n, int64_t(1) << 30));
    } else {
        // max-num-seqs full-length sequences; by default (no --max-model-len) at most a quarter of
        // the memory available, never less than one sequence
        int64_t n = int64_t(c.max_num_seqs) * one;
        const int64_t avail = int64_t(memory_available_bytes());
        if (!z.max_len_given && avail > 0 && block_all > 0)
            n = std::min(n, std::max<int64_t>(one, (avail / 4 - int64_t(z.n_slots) * slot_all) / block_all));
        z.n_blocks = int32_t(std::min<int64_t>(n, int64_t(1) << 30));
    }
    // A split model: every rank sizes its cache as rank 0 did (available memory may differ).
    if (m.shard().split()) dist::Comm::world().broadcast(&z, sizeof z);
    return z;
}

int64_t default_prefix_cache_bytes(int64_t slot_bytes, int32_t max_num_seqs) {
    const int64_t want = 8 * int64_t(std::max(max_num_seqs, 1)) * std::max<int64_t>(slot_bytes, 4);
    const int64_t avail = int64_t(memory_available_bytes());
    return avail > 0 ? std::min(want, avail / 8) : want;
}

std::string CacheSizing::length_warning() const {
    if (!max_len_given || model_max_len <= 0 || max_model_len <= model_max_len) return "";
    return "warning: --max-model-len " + std::to_string(max_model_len) + " is past the " +
        std::to_string(model_max_len) +
        " tokens the model declares (max_position_embeddings): it runs (NoPE MLA and KDA have no position "
        "limit), but the model was not trained on longer contexts and may answer worse past them";
}

std::string CacheSizing::describe() const {
    std::string s = "cache: " + std::to_string(n_slots) + " state slots x " + human_bytes(slot_bytes) + " (KDA) + " +
        std::to_string(n_blocks) + " blocks x " + std::to_string(block_size) + " tokens (" +
        std::to_string(cached_tokens()) + " tokens of MLA cache, " + human_bytes(int64_t(n_blocks) * block_bytes) + ")";
    if (draft_slot_bytes + draft_block_bytes > 0)
        s += " + the draft model's " +
            human_bytes(int64_t(n_slots) * draft_slot_bytes + int64_t(n_blocks) * draft_block_bytes);
    s += " = " + human_bytes(total_bytes()) + "; max-model-len " + std::to_string(max_model_len);
    if (!max_len_given)
        s += model_max_len == 0             ? " (the config gives no max_position_embeddings)"
            : max_model_len < model_max_len ? " (the model's " + std::to_string(model_max_len) +
                ", capped by the cache memory; --max-model-len, --cache-memory)"
                                            : " (the model's max_position_embeddings)";
    if (!prefix_caching) return s + "; prefix cache off";
    return s + "; prefix cache on: " + std::to_string(n_checkpoints) + " KDA checkpoints x " + human_bytes(slot_bytes) +
        " = " + human_bytes(int64_t(n_checkpoints) * slot_bytes) + " (--prefix-cache-memory), every " +
        std::to_string(checkpoint_interval) + " tokens and at each prompt's and reply's last full block";
}

}   // namespace kimi
