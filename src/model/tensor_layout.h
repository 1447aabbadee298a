// TensorLayout: the one manifest of a checkpoint's tensors, from its parsed config — each
// tensor's name, published shape and dtype, what kind of weight it is (which decides whether
// `quantize` may store it as MXFP4 and how `make-model` draws it), the axis tensor
// parallelism splits it along, which weight of its layer it is (its slot), and its name and
// form in a GGUF file. The loader (bind_weights, by slot), the GGUF mapping, `make-model`,
// `quantize`, `inspect --tensors` and the bytes a step reads (step_traffic) all read it;
// nothing else spells a tensor name or shape.
// Names and shapes: docs/model.md#weights (Kimi Linear), docs/model.md#k3 (Kimi-K3 blocks) and
// docs/vision.md#tensors (the K3 vision tower and projector).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/gguf_names.h"
#include "core/dtype.h"
#include "model/config.h"

namespace kimi {

// What a tensor is, for the tools: the matrix-product weights by the part of the model they
// belong to (quantize's --targets select among them), and the other kinds by how a random
// checkpoint draws them.
enum class TensorRole : uint8_t {
    kEmbedding,      // token embedding table (row lookup, never a matrix product)
    kLinear,         // a matrix-product weight [out, in] (attention, dense MLP, latent projections, lm_head)
    kRouter,         // the MoE router [E, D] (its logits are always computed in f32; never quantized)
    kSharedExpert,   // a shared expert's gate/up/down
    kRoutedExpert,   // a routed expert's w1/w3/w2
    kNorm,           // an RMSNorm weight (or an AttnRes norm)
    kConv,           // KDA short-convolution kernel [H*K, 1, W]
    kALog,           // KDA A_log (the forget gate's decay rates)
    kDtBias,         // KDA dt_bias
    kScoreBias,      // the router's e_score_correction_bias
    kPatchEmbed,     // the vision tower's patch embedding [D, 3, p, p] (a linear map of the 3·p·p pixels)
    kPosEmb,         // the vision tower's position-embedding grid [Gh, Gw, D]
};

// Which weight a row is within its decoder layer (or the model, or a vision block): the binder
// and the tools address rows by slot and layer, never by name.
enum class Slot : uint8_t {
    // the model (layer -1)
    kEmbed,
    kFinalNorm,
    kOutputResNorm,
    kOutputResProj,
    kLmHead,
    // every decoder layer
    kAttnNorm,
    kFfnNorm,
    kAttnResNorm,
    kAttnResProj,
    kFfnResNorm,
    kFfnResProj,
    // KDA
    kKdaQ,
    kKdaK,
    kKdaV,
    kKdaQConv,
    kKdaKConv,
    kKdaVConv,
    kKdaFA,
    kKdaFB,
    kKdaDtBias,
    kKdaALog,
    kKdaB,
    kKdaG,
    kKdaGA,
    kKdaGB,
    kKdaONorm,
    kKdaO,
    // MLA
    kMlaQA,
    kMlaQANorm,
    kMlaQB,
    kMlaQ,
    kMlaKvA,
    kMlaKvANorm,
    kMlaKvB,
    kMlaG,
    kMlaO,
    // MoE (a routed expert's three rows: its `expert` number) and the dense MLP
    kRouter,
    kScoreBias,
    kLatentDown,
    kLatentNorm,
    kLatentUp,
    kExpertGate,
    kExpertUp,
    kExpertDown,
    kSharedGate,
    kSharedUp,
    kSharedDown,
    kMlpGate,
    kMlpUp,
    kMlpDown,
    // the vision tower (block slots: layer = the block) and projector
    kPatchEmbed,
    kPosEmb,
    kVisNorm0,
    kVisNorm1,
    kVisQkv,
    kVisO,
    kVisFc0,
    kVisFc1,
    kVisFinalNorm,
    kProj0,
    kProj2,
    kProjPostNorm,
    kCount
};

struct TensorRow {
    std::string name;             // as the text model names it (the checkpoint adds TensorLayout::prefix)
    std::vector<int64_t> shape;   // as published
    DType dtype = DType::kBF16;   // as this family publishes it (the loader takes any float class)
    TensorRole role = TensorRole::kLinear;
    int split = -1;          // tensor-parallel split axis (-1: every rank holds all of it)
    bool out_proj = false;   // a linear writing back toward the residual (o_proj, down, latent up)
    bool vision = false;     // the vision tower / projector: named without the prefix, never quantized
    Slot slot = Slot::kEmbed;
    int64_t layer = -1;    // the decoder layer (vision block slots: the block); -1: the model's
    int64_t expert = -1;   // a routed expert's number
    std::string gguf;      // the GGUF tensor that holds it (with its layer: "blk.3.attn_q.weight")
    std::string gguf_v;    // kSplitKvB: the v half
    GgufForm gguf_form = GgufForm::kNone;

    bool is_linear() const;   // a matrix-product weight: kLinear, kRouter or an expert's
    // `quantize` can store it as MXFP4: a linear other than the router, input width a multiple of 32.
    bool quantizable() const;
    std::string module() const;   // a linear's module name (name less ".weight"); "" otherwise
};

class TensorLayout {
public:
    explicit TensorLayout(const ModelConfig& c);

    const std::string& prefix() const { return prefix_; }          // "" or "language_model." (K3)
    const std::vector<TensorRow>& rows() const { return rows_; }   // in checkpoint order
    // The name in the checkpoint: prefix + name (vision rows: the name itself).
    std::string full_name(const TensorRow& r) const { return r.vision ? r.name : prefix_ + r.name; }
    const TensorRow* find(const std::string& name) const;   // name without the prefix
    const TensorRow& at(const std::string& name) const;     // throws kimi::Error if absent
    // The row of `slot` in `layer` (-1: the model's; a vision block slot: the block), of routed
    // expert `expert`; nullptr when the config has no such row (a block it switches off).
    const TensorRow* find(Slot slot, int64_t layer = -1, int64_t expert = -1) const;
    size_t index_of(const TensorRow& r) const { return size_t(&r - rows_.data()); }
    // Where each row comes from in a GGUF file (rows with a GGUF form), for WeightStore.
    std::vector<GgufSource> gguf_sources() const;

private:
    using SlotRows = std::array<int32_t, size_t(Slot::kCount)>;   // row index by slot, -1: none
    void add_layer(const ModelConfig& c, int64_t i);
    void add_kda(const ModelConfig& c, const std::string& a, const std::string& g);
    void add_mla(const ModelConfig& c, const std::string& a, const std::string& g);
    void add_moe(const ModelConfig& c, const std::string& m, const std::string& g);
    void add_vision(const VisionConfig& v);
    // Appends a row of the current layer (layer_) and indexes it by slot.
    TensorRow& add(Slot s, std::string name, std::vector<int64_t> shape, TensorRole role, int split, DType t,
                   std::string gguf, GgufForm form = GgufForm::kSame);
    std::string prefix_;
    DType small_ = DType::kBF16;   // conv, o_norm, router bias, model-level norms (F32 in K3)
    int64_t layer_ = -1;
    std::vector<TensorRow> rows_;
    std::map<std::string, size_t> index_;
    SlotRows model_slots_;
    std::vector<SlotRows> layer_slots_, block_slots_;   // decoder layers; vision blocks
};

}   // namespace kimi
