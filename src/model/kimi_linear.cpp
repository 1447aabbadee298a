// KimiLinearModel implementation (see kimi_linear.h).
#include "model/kimi_linear.h"

#include <chrono>
#include <cstring>

#include "core/alloc_counter.h"
#include "model/layers/ffn.h"
#include "model/layers/kda_attention.h"
#include "model/layers/mla_attention.h"

namespace kimi {

std::unique_ptr<KimiLinearModel> KimiLinearModel::load(const std::string& model_dir, const LoadProgress& progress) {
    auto m = std::unique_ptr<KimiLinearModel>(new KimiLinearModel());
    m->cfg_ = load_model_config(model_dir);
    m->store_ = std::make_unique<WeightStore>(model_dir);
    m->weights_ = bind_weights(m->cfg_, *m->store_, progress);
    return m;
}

CacheGeometry KimiLinearModel::cache_geometry(int32_t n_slots, int32_t n_blocks, int32_t block_size) const {
    CacheGeometry g;
    g.n_kda_layers = cfg_.n_kda_layers();
    g.kda_heads = cfg_.kda_heads;
    g.kda_head_dim = cfg_.kda_head_dim;
    g.conv_kernel = cfg_.conv_kernel;
    g.n_mla_layers = cfg_.n_mla_layers();
    g.latent_width = cfg_.mla_latent_width();
    g.n_slots = n_slots;
    g.n_blocks = n_blocks;
    g.block_size = block_size;
    return g;
}

void KimiLinearModel::layer_forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache, int64_t layer,
                                    Tensor& residual) const {
    const LayerWeights& lw = weights_.layers[size_t(layer)];
    const int64_t n = residual.dim(0), d = cfg_.hidden_size;
    LayerContext lc{ex, cfg_, batch, cache, ops::SeqLayout{batch.seq_starts, batch.state_slots}};

    Tensor xn = ex.arena->alloc_f32({n, d});                   // [T, D]
    ops::rms_norm(ex, residual, lw.attn_norm, cfg_.rms_norm_eps, xn);
    const Tensor attn = lw.kind == LayerKind::kKda ? kda_attention_forward(lc, lw.kda, lw.cache_index, xn)
                                                   : mla_attention_forward(lc, lw.mla, lw.cache_index, xn);
    Tensor addend = attn;
    if (ex.attn_output == AttnOutputMode::kCopy) {
        // The A/B baseline: as engines whose attention writes a caller-provided buffer.
        addend = ex.arena->alloc_f32({n, d});
        std::memcpy(addend.data, attn.data, attn.nbytes());
        ++ex.counters.attn_output_copies;
    }
    ex.trace.residual_addend = addend.data;
    ops::add_inplace(ex, residual, addend);

    ops::rms_norm(ex, residual, lw.ffn_norm, cfg_.rms_norm_eps, xn);
    const Tensor ffn = lw.is_moe ? moe_forward(ex, cfg_, lw.moe, xn) : mlp_forward(ex, lw.mlp, xn);
    ops::add_inplace(ex, residual, ffn);
}

Tensor KimiLinearModel::forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache) const {
    const auto t_start = std::chrono::steady_clock::now();
    const uint64_t allocs_before = thread_alloc_count() + ex.pool->worker_alloc_count();
    ex.counters = StepCounters{};
    for (int32_t id : batch.token_ids)
        if (id < 0 || id >= cfg_.vocab_size)
            throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(cfg_.vocab_size) + ")");
    KIMI_CHECK(batch.seq_starts.size() == batch.n_past.size() + 1 && batch.state_slots.size() == batch.n_past.size(),
               "forward: inconsistent batch");
    const int64_t n = int64_t(batch.token_ids.size()), d = cfg_.hidden_size;

    Tensor residual = ex.arena->alloc_f32({n, d});             // [T, D] the residual stream
    ops::embedding(ex, weights_.embed, batch.token_ids, residual);
    for (int64_t l = 0; l < cfg_.n_layers; ++l) layer_forward(ex, batch, cache, l, residual);

    const int64_t r = int64_t(batch.logit_rows.size());
    Tensor rows = ex.arena->alloc_f32({r, d});                 // [R, D] only the rows that need logits
    for (int64_t i = 0; i < r; ++i)
        std::memcpy(rows.f32() + i * d, residual.f32() + int64_t(batch.logit_rows[size_t(i)]) * d, size_t(d) * sizeof(float));
    ops::rms_norm(ex, rows, weights_.final_norm, cfg_.rms_norm_eps, rows);
    Tensor logits = ex.arena->alloc_f32({r, cfg_.vocab_size});  // [R, vocab]
    ops::matmul(ex, rows, weights_.lm_head, ex.precision, logits);

    ex.counters.n_tokens = n;
    ex.counters.heap_allocations = int64_t(thread_alloc_count() + ex.pool->worker_alloc_count() - allocs_before);
    ex.counters.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    return logits;
}

}  // namespace kimi
