// CacheStorage implementation (see cache_storage.h).
#include "cache/cache_storage.h"

#include <algorithm>

namespace kimi {

CacheStorage::CacheStorage(const CacheGeometry& g) : g_(g) {
    for (int64_t l = 0; l < g.n_kda_layers; ++l) {
        state_.emplace_back(new float[size_t(g.n_slots * g.state_floats_per_slot())]());
        conv_.emplace_back(new float[size_t(g.n_slots * g.conv_floats_per_slot())]());
    }
    const size_t per_layer = size_t(int64_t(g.n_blocks) * g.block_size * g.latent_width);
    for (int64_t l = 0; l < g.n_mla_layers; ++l) {
        if (g.latent_bf16)
            mla_bf16_.emplace_back(new uint16_t[per_layer]());
        else
            mla_.emplace_back(new float[per_layer]());
    }
}

ops::SlotState CacheStorage::kda_state(int64_t kda_layer) {
    return {state_[size_t(kda_layer)].get(), g_.state_floats_per_slot()};
}

ops::SlotState CacheStorage::conv_state(int64_t kda_layer, int which) {
    const int64_t one = (g_.conv_kernel - 1) * g_.kda_heads * g_.kda_head_dim;
    return {conv_[size_t(kda_layer)].get() + which * one, g_.conv_floats_per_slot()};
}

ops::PagedLatents CacheStorage::mla_latents(int64_t mla_layer) {
    ops::PagedLatents p;
    if (g_.latent_bf16)
        p.base_bf16 = mla_bf16_[size_t(mla_layer)].get();
    else
        p.base = mla_[size_t(mla_layer)].get();
    p.block_size = g_.block_size;
    p.row_width = g_.latent_width;
    return p;
}

void CacheStorage::reset_slot(int32_t slot) {
    if (log_) log_->push_back({-1, slot});
    for (int64_t l = 0; l < g_.n_kda_layers; ++l) {
        float* s = state_[size_t(l)].get() + slot * g_.state_floats_per_slot();
        std::fill(s, s + g_.state_floats_per_slot(), 0.0f);
        float* c = conv_[size_t(l)].get() + slot * g_.conv_floats_per_slot();
        std::fill(c, c + g_.conv_floats_per_slot(), 0.0f);
    }
}

void CacheStorage::copy_slot(int32_t src, int32_t dst) {
    if (log_) log_->push_back({src, dst});
    const int64_t ns = g_.state_floats_per_slot(), nc = g_.conv_floats_per_slot();
    for (int64_t l = 0; l < g_.n_kda_layers; ++l) {
        float *s = state_[size_t(l)].get(), *c = conv_[size_t(l)].get();
        std::copy_n(s + src * ns, ns, s + dst * ns);
        std::copy_n(c + src * nc, nc, c + dst * nc);
    }
}

int64_t CacheStorage::bytes() const { return g_.n_slots * g_.bytes_per_slot() + g_.n_blocks * g_.bytes_per_block(); }

}   // namespace kimi
