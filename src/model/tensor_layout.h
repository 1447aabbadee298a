// TensorLayout: the one manifest of a checkpoint's tensors, from its parsed config — each
// tensor's name, published shape and dtype, what kind of weight it is (which decides whether
// `quantize` may store it as MXFP4 and how `make-model` draws it) and the axis tensor
// parallelism splits it along. The loader (bind_weights), `make-model`, `quantize` and
// `inspect --tensors` all read it; nothing else spells a tensor name or shape.
// Names and shapes: docs/model.md#weights (Kimi Linear), docs/model.md#k3 (Kimi-K3 blocks) and
// docs/vision.md#tensors (the K3 vision tower and projector).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

struct TensorRow {
    std::string name;             // as the text model names it (the checkpoint adds TensorLayout::prefix)
    std::vector<int64_t> shape;   // as published
    DType dtype = DType::kBF16;   // as this family publishes it (the loader takes any float class)
    TensorRole role = TensorRole::kLinear;
    int split = -1;          // tensor-parallel split axis (-1: every rank holds all of it)
    bool out_proj = false;   // a linear writing back toward the residual (o_proj, down, latent up)
    bool vision = false;     // the vision tower / projector: named without the prefix, never quantized

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
    const TensorRow& linear(const std::string& module) const { return at(module + ".weight"); }

private:
    void add_vision(const VisionConfig& v);
    std::string prefix_;
    std::vector<TensorRow> rows_;
    std::map<std::string, size_t> index_;
};

}   // namespace kimi
