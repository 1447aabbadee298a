// `kimi-cpp inspect`: a model directory's config summary, layer map, parameter count,
// bytes, and the bytes one decode step must read per token.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "model/kimi_model.h"
#include "model/step_traffic.h"

namespace kimi::app {

namespace {
double mib(double b) { return b / 1048576.0; }
}  // namespace

int cmd_inspect(int argc, char** argv) {
    ArgParser args("inspect", argc, argv);
    const std::string dir = args.required("--model");
    args.done();
    auto model = KimiModel::load(dir);
    const ModelConfig& c = model->config();
    const ModelWeights& w = model->weights();

    std::printf("model:        %s (%s)\n", dir.c_str(), c.architecture.c_str());
    std::printf("hidden:       %lld, layers %lld, vocab %lld, rms_norm_eps %g, tied embeddings %s\n",
                (long long)c.hidden_size, (long long)c.n_layers, (long long)c.vocab_size, double(c.rms_norm_eps),
                c.tie_word_embeddings ? "yes" : "no");
    std::printf("KDA:          %lld heads x %lld, short conv %lld (%lld layers)\n", (long long)c.kda_heads,
                (long long)c.kda_head_dim, (long long)c.conv_kernel, (long long)c.n_kda_layers());
    std::printf("MLA (NoPE):   %lld heads, nope %lld + rope %lld, v %lld, latent %lld (%lld layers)\n",
                (long long)c.mla_heads, (long long)c.qk_nope_dim, (long long)c.qk_rope_dim, (long long)c.v_head_dim,
                (long long)c.kv_lora_rank, (long long)c.n_mla_layers());
    std::printf("MoE:          %lld experts, top-%lld, %lld shared, width %lld, groups %lld/%lld, scale %g, renorm %s\n",
                (long long)c.n_experts, (long long)c.n_experts_per_token, (long long)c.n_shared_experts,
                (long long)c.moe_intermediate_size, (long long)c.topk_groups, (long long)c.n_expert_groups,
                double(c.routed_scaling_factor), c.moe_renormalize ? "yes" : "no");
    std::printf("dense MLP:    width %lld (layers < %lld)\n", (long long)c.intermediate_size,
                (long long)c.first_k_dense_replace);

    std::printf("\nlayer map (0-based):\n");
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const LayerWeights& l = w.layers[size_t(i)];
        std::printf("  %3lld  %-4s %s\n", (long long)i, l.kind == LayerKind::kKda ? "KDA" : "MLA", l.is_moe ? "MoE" : "dense");
    }
    const double decode_bytes = decode_step_traffic(*model, 1, 0).weight_bytes;
    const int64_t file_bytes = int64_t(model->store().tensor_bytes());
    const int64_t params = model->store().n_params();
    const CacheGeometry g = model->cache_geometry(1, 1);
    std::printf("\nparameters:   %lld (%.1f MiB of tensors in %zu file(s))\n", (long long)params, mib(double(file_bytes)),
                model->store().n_files());
    std::printf("decode read:  %.2f MiB of weights per step at batch 1 (selected experts only)\n", mib(decode_bytes));
    std::printf("cache:        KDA state %.2f MiB per sequence; MLA latents %lld B per token of context\n",
                mib(double(g.bytes_per_slot())), (long long)(g.bytes_per_block() / g.block_size));
    return 0;
}

}  // namespace kimi::app
