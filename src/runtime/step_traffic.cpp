// StepTraffic (see step_traffic.h).
#include "runtime/step_traffic.h"

#include <algorithm>
#include <cmath>

#include "model/tensor_layout.h"

namespace kimi {

namespace {
// Bytes a product reads from the weight (MXFP4: packed values plus one scale byte per 32).
double bytes_of(const Tensor& t) {
    return double(t.nbytes()) + (t.dtype == DType::kMXFP4 ? double(t.numel()) / double(kMxfp4Group) : 0.0);
}
double elems_of(const Tensor& t) { return double(t.numel()); }
}   // namespace

// The model-level tensors as a step reads them (the lm_head, the final norm, one embedding row
// per token), then every matrix product of the layers by its tensor-layout row, in the form
// this rank holds it (ModelWeights::held): a routed expert is read when any of the batch's
// tokens picks it (k of E each) and multiplies k/E of the tokens. Norms, convolutions and
// biases are left out: a few KiB against the products' MiB.
StepTraffic decode_step_traffic(const KimiModel& model, int64_t batch, int64_t context, bool latent_bf16) {
    const ModelConfig& c = model.config();
    const ModelWeights& w = model.weights();
    StepTraffic t;
    t.weight_bytes = bytes_of(w.lm_head) + bytes_of(w.final_norm) +
        double(batch) * double(w.embed.nbytes()) / double(std::max<int64_t>(w.embed.dim(0), 1));   // rows read
    t.head_macs = elems_of(w.lm_head);
    t.macs_per_token = t.head_macs;
    const double e = double(std::max<int64_t>(c.n_experts, 1)), k = double(c.n_experts_per_token);
    const double p_read = 1.0 - std::pow(1.0 - k / e, double(batch));
    const TensorLayout layout(c);
    for (size_t i = 0; i < layout.rows().size(); ++i) {
        const TensorRow& r = layout.rows()[i];
        const Tensor& x = w.held[i];
        if (r.layer < 0 || r.vision || !r.is_linear() || !x.defined()) continue;
        const bool routed = r.role == TensorRole::kRoutedExpert;
        t.weight_bytes += (routed ? p_read : 1.0) * bytes_of(x);
        t.macs_per_token += (routed ? k / e : 1.0) * elems_of(x);
    }
    const CacheGeometry g = model.cache_geometry(1, 1, 16, latent_bf16);
    t.cache_bytes = double(batch) *
        (2.0 * double(g.bytes_per_slot()) + double(context) * double(g.bytes_per_block()) / double(g.block_size));
    return t;
}

double attention_macs(const KimiModel& model, int64_t n_tokens, int64_t context) {
    const ModelConfig& c = model.config();
    const double n = double(n_tokens);
    // sum over the prompt's tokens of the positions each attends: context + 1 … context + n
    const double positions = n * double(context) + n * (n + 1) / 2;
    const double mla =
        double(c.n_mla_layers()) * double(c.mla_heads) * double(c.mla_latent_width() + c.kv_lora_rank) * positions;
    const double kda =
        double(c.n_kda_layers()) * double(c.kda_heads) * 3.0 * double(c.kda_head_dim) * double(c.kda_head_dim) * n;
    return mla + kda;
}

// Every text-model row's held form (the vision tower is reported on its own); a tied lm_head
// is the embedding, which has the one row.
double held_weight_bytes(const KimiModel& model) {
    const TensorLayout layout(model.config());
    double b = 0;
    for (size_t i = 0; i < layout.rows().size(); ++i)
        if (!layout.rows()[i].vision && model.weights().held[i].defined()) b += bytes_of(model.weights().held[i]);
    return b;
}

}   // namespace kimi
