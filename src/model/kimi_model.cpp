// KimiModel implementation (see kimi_model.h).
#include "model/kimi_model.h"

#include <chrono>
#include <cstring>
#include <new>

#include "core/alloc_counter.h"
#include "model/layers/attn_output.h"
#include "model/layers/ffn.h"
#include "model/layers/kda_attention.h"
#include "model/layers/mla_attention.h"
#include "model/tensor_layout.h"
#include "model/vision/vision_tower.h"

namespace kimi {

std::unique_ptr<KimiModel> KimiModel::load(const std::string& model_dir, const LoadProgress& progress,
                                           WeightMemory memory, const Shard& shard, bool check_weights) {
    auto m = std::unique_ptr<KimiModel>(new KimiModel());
    m->cfg_ = load_model_config(model_dir);
    m->shard_ = shard;
    if (shard.split()) {
        dist::Comm& world = dist::Comm::world();
        if (world.size() != shard.size || world.rank() != shard.rank)
            throw Error("a model split over " + std::to_string(shard.size) +
                        " ranks needs an MPI job of that size (this is rank " + std::to_string(world.rank()) + " of " +
                        std::to_string(world.size()) + ")");
        m->comm_ = &world;
        // why: mapped, a rank touches only its slices' pages, and ranks on one host share the
        // page cache; a private copy would hold the whole checkpoint once per rank.
        if (memory == WeightMemory::kAuto) memory = WeightMemory::kMmap;
    }
    const std::vector<GgufSource> gguf =
        is_gguf_path(model_dir) ? TensorLayout(m->cfg_).gguf_sources() : std::vector<GgufSource>{};
    m->store_ = std::make_unique<WeightStore>(model_dir, memory, progress, &gguf);
    m->store_->set_check_weights(check_weights);
    if (m->cfg_.is_k3_layout()) {   // the vision tower and projector are kept when the config has them
        std::vector<std::string> top_level;
        if (m->cfg_.vision.present) top_level = {"vision_tower.", "mm_projector."};
        m->store_->select_prefix(m->cfg_.tensor_prefix, top_level);
    }
    // A copy has reported its reading; checking the tensors then takes no time worth a bar.
    const bool copied = m->store_->file_memory() == FileMemory::kHugeCopy;
    m->weights_ = bind_weights(m->cfg_, *m->store_, copied ? LoadProgress{} : progress, shard);
    m->local_ = m->cfg_;
    m->local_.kda_heads = shard.part(m->cfg_.kda_heads).size();
    m->local_.mla_heads = shard.part(m->cfg_.mla_heads).size();
    return m;
}

CacheGeometry KimiModel::cache_geometry(int32_t n_slots, int32_t n_blocks, int32_t block_size, bool latent_bf16) const {
    CacheGeometry g;
    g.latent_bf16 = latent_bf16;
    g.n_kda_layers = cfg_.n_kda_layers();
    g.kda_heads = local_.kda_heads;   // this rank's heads: the others' state lives on their ranks
    g.kda_head_dim = cfg_.kda_head_dim;
    g.conv_kernel = cfg_.conv_kernel;
    g.n_mla_layers = cfg_.n_mla_layers();
    g.latent_width = cfg_.mla_latent_width();
    g.n_slots = n_slots;
    g.n_blocks = n_blocks;
    g.block_size = block_size;
    return g;
}

KimiModel::Residual KimiModel::new_residual(Exec& ex, int64_t n_tokens) const {
    Residual r;
    r.home = ex.arena;
    r.partial = ex.arena->alloc_f32({n_tokens, cfg_.hidden_size});
    const size_t cap = size_t(cfg_.attn_res_n_blocks());
    if (cap > 0) r.blocks = {static_cast<const Tensor**>(ex.arena->alloc_bytes(cap * sizeof(Tensor*))), cap};
    return r;
}

namespace {

// The sublayer input under Block AttnRes: the softmax mix of the banked blocks and the
// partial sum (the partial sum itself while nothing is banked).
Tensor attn_res_input(Exec& ex, const ModelConfig& c, const KimiModel::Residual& r, const Tensor& score) {
    if (c.attn_res_block_size == 0 || r.n_blocks == 0) return r.partial;
    Tensor h = ex.arena->alloc_f32({r.partial.dim(0), r.partial.dim(1)});   // [T, D]
    ops::attn_res_mix(ex, std::span<const Tensor* const>(r.blocks.data(), r.n_blocks), r.partial, score, c.rms_norm_eps,
                      h);
    return h;
}

}   // namespace

void KimiModel::layer_forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache, int64_t layer,
                              Residual& res) const {
    const LayerWeights& lw = weights_.layers[size_t(layer)];
    const int64_t n = res.partial.dim(0), d = cfg_.hidden_size;
    LayerContext lc{ex, local_, batch, cache, ops::SeqLayout{batch.seq_starts, batch.state_slots, batch.captures}};

    const Tensor h = attn_res_input(ex, cfg_, res, lw.attn_res_score);   // [T, D]
    // AttnRes block boundary: bank the raw incoming partial sum; the attention output starts the next.
    const bool bank = cfg_.attn_res_block_size > 0 && layer % cfg_.attn_res_block_size == 0;
    if (bank) {
        KIMI_CHECK(res.n_blocks < res.blocks.size(), "layer_forward: more AttnRes blocks than the config has");
        res.blocks[res.n_blocks++] = new (res.home->alloc_bytes(sizeof(Tensor))) Tensor(res.partial);
        // the next partial sum starts from zero in memory that outlives this layer's scratch
        res.partial = res.home->alloc_f32({n, d});
        std::memset(res.partial.data, 0, res.partial.nbytes());
    }

    Tensor xn = ex.arena->alloc_f32({n, d});   // [T, D]
    ops::rms_norm(ex, h, lw.attn_norm, cfg_.rms_norm_eps, xn);
    const Tensor attn = lw.kind == LayerKind::kKda ? kda_attention_forward(lc, lw.kda, lw.cache_index, xn)
                                                   : mla_attention_forward(lc, lw.mla, lw.cache_index, xn);
    // Split: o_proj was row-parallel; the sum over ranks lands in that very tensor.
    if (comm_) comm_->allreduce_sum({attn.f32(), size_t(attn.numel())});
    ops::add_inplace(ex, res.partial, residual_addend(ex, attn));   // that very tensor, into the residual

    ops::rms_norm(ex, attn_res_input(ex, cfg_, res, lw.ffn_res_score), lw.ffn_norm, cfg_.rms_norm_eps, xn);
    const Tensor ffn = lw.is_moe ? moe_forward(ex, cfg_, lw.moe, xn, comm_) : mlp_forward(ex, cfg_.act, lw.mlp, xn);
    if (comm_ && !lw.is_moe) comm_->allreduce_sum({ffn.f32(), size_t(ffn.numel())});   // down was row-parallel
    ops::add_inplace(ex, res.partial, ffn);
}

void KimiModel::embed(Exec& ex, std::span<const int32_t> ids, Tensor& y) const {
    if (!comm_) return ops::embedding(ex, weights_.embed, ids, y);
    // Vocabulary-parallel: this rank's rows, zeros elsewhere, summed over ranks (one nonzero term).
    const int64_t d = cfg_.hidden_size;
    std::memset(y.data, 0, y.nbytes());
    for (size_t t = 0; t < ids.size(); ++t) {
        const int64_t row = ids[t] - weights_.vocab.begin;
        if (row < 0 || row >= weights_.vocab.size()) continue;
        decode_row_f32(weights_.embed, row, y.f32() + int64_t(t) * d);
    }
    comm_->allreduce_sum({y.f32(), size_t(y.numel())});
}

Tensor KimiModel::lm_head(Exec& ex, const Tensor& rows) const {
    const int64_t r = rows.dim(0), v = cfg_.vocab_size, vl = weights_.vocab.size();
    Tensor logits = ex.arena->alloc_f32({r, v});   // [R, vocab]
    if (!comm_) {
        ops::matmul(ex, rows, weights_.lm_head, ex.precision, logits);
        return logits;
    }
    Tensor mine = ex.arena->alloc_f32({r, vl});   // [R, this rank's vocabulary]
    ops::matmul(ex, rows, weights_.lm_head, ex.precision, mine);
    comm_->allgather({mine.f32(), size_t(mine.numel())}, gathered_);   // rank blocks [R, V_q], in rank order
    int64_t off = 0;
    for (int q = 0; q < shard_.size; ++q) {
        const dist::Range part = dist::split(v, shard_.size, q);
        for (int64_t i = 0; i < r; ++i)
            std::memcpy(logits.f32() + i * v + part.begin, gathered_.data() + off + i * part.size(),
                        size_t(part.size()) * 4);
        off += r * part.size();
    }
    return logits;
}

Tensor KimiModel::encode_image(Exec& ex, const Tensor& patches, int64_t grid_h, int64_t grid_w,
                               const std::function<void(int64_t, int64_t)>& progress) const {
    if (!weights_.vision) throw Error(vision_unavailable_reason());
    return kimi::encode_image(ex, cfg_.vision, *weights_.vision, patches, grid_h, grid_w, progress);
}

std::string KimiModel::vision_unavailable_reason() const {
    if (has_vision()) return "";
    if (!cfg_.is_k3_layout())
        return "this model (" + cfg_.architecture + ") has no vision tower: images are not accepted";
    if (!cfg_.vision.unsupported.empty())
        return "this Kimi-K3 checkpoint's vision tower cannot run here (" + cfg_.vision.unsupported +
            "): images are not accepted; the text model works";
    if (!cfg_.vision.present) return "this Kimi-K3 config has no vision_config: images are not accepted";
    return "this Kimi-K3 checkpoint has no vision tower (vision_tower.* tensors): images are not accepted";
}

Tensor KimiModel::forward(Exec& ex, const ForwardBatch& batch, CacheStorage& cache) const {
    const auto t_start = std::chrono::steady_clock::now();
    const uint64_t allocs_before = thread_alloc_count() + ex.pool->worker_alloc_count();
    const uint64_t faults_before = process_page_faults();
    ex.counters = StepCounters{};
    for (int32_t id : batch.token_ids)
        if (id < 0 || id >= cfg_.vocab_size)
            throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(cfg_.vocab_size) +
                        ")");
    KIMI_CHECK(batch.seq_starts.size() == batch.n_past.size() + 1 && batch.state_slots.size() == batch.n_past.size(),
               "forward: inconsistent batch");
    const int64_t n = int64_t(batch.token_ids.size()), d = cfg_.hidden_size;

    Residual res = new_residual(ex, n);   // [T, D] the residual stream
    embed(ex, batch.token_ids, res.partial);
    KIMI_CHECK(batch.embed_values.size() == batch.embed_rows.size() * size_t(d), "forward: image rows");
    for (size_t i = 0; i < batch.embed_rows.size(); ++i) {   // image tokens: the projector's rows
        KIMI_CHECK(batch.embed_rows[i] >= 0 && batch.embed_rows[i] < n, "forward: image row out of range");
        std::memcpy(res.partial.f32() + int64_t(batch.embed_rows[i]) * d, batch.embed_values.data() + int64_t(i) * d,
                    size_t(d) * sizeof(float));
    }
    Arena* const step_arena = ex.arena;
    for (int64_t l = 0; l < cfg_.n_layers; ++l) {
        if (ex.layer_arena) ex.arena = ex.layer_arena;   // the layer's scratch
        layer_forward(ex, batch, cache, l, res);
        ex.arena = step_arena;
        if (ex.layer_arena) ex.layer_arena->reset();
    }
    const Tensor residual = attn_res_input(ex, cfg_, res, weights_.output_res_score);

    const int64_t r = int64_t(batch.logit_rows.size());
    Tensor rows = ex.arena->alloc_f32({r, d});   // [R, D] only the rows that need logits
    for (int64_t i = 0; i < r; ++i)
        std::memcpy(rows.f32() + i * d, residual.f32() + int64_t(batch.logit_rows[size_t(i)]) * d,
                    size_t(d) * sizeof(float));
    ops::rms_norm(ex, rows, weights_.final_norm, cfg_.rms_norm_eps, rows);
    const Tensor logits = lm_head(ex, rows);   // [R, vocab]

    ex.counters.n_tokens = n;
    ex.counters.heap_allocations = int64_t(thread_alloc_count() + ex.pool->worker_alloc_count() - allocs_before);
    ex.counters.page_faults = int64_t(process_page_faults() - faults_before);
    ex.counters.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    return logits;
}

}   // namespace kimi
