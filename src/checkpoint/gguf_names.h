// The map from a GGUF file's tensors to the Hugging Face names the loader asks for: one entry
// per tensor-layout row (model/tensor_layout.h writes them), saying which GGUF tensor holds the
// row and how llama.cpp's converter changed it on the way, so that WeightStore can undo it
// exactly. ref: docs/gguf.md#tensors; llama.cpp conversion/kimi_linear.py, kimi_k3.py.
#pragma once
#include <cstdint>
#include <string>

namespace kimi {

enum class GgufForm : uint8_t {
    kNone,            // not in a GGUF (the K3 vision tower: llama.cpp keeps it in a separate file)
    kSame,            // renamed only; GGUF's ggml dimension order reversed is the PyTorch shape
    kFoldedALog,      // KDA A_log stored as -exp(A_log), one value per head, in any rank
    kSqueezedConv,    // KDA conv kernel [H*K, 1, W] stored as [1, H*K, 1, W] or any squeeze of it
    kStackedExpert,   // routed expert `index` of a per-layer stack [E, out, in]
    kSplitKvB,        // MLA kv_b_proj [H*(n+v), r] stored as `gguf` = k_b [H, r, n] + `gguf_v` = v_b [H, v, r]
    kFusedAttnRes,    // an AttnRes pair stored as its product: `index` 0, the norm, is that vector;
                      // 1, the projection [1, D], is all ones (the loader multiplies them back)
};

struct GgufSource {
    std::string hf;       // the tensor's full Hugging Face name (text prefix included)
    std::string gguf;     // the GGUF tensor that holds it
    std::string gguf_v;   // kSplitKvB: the v half
    GgufForm form = GgufForm::kSame;
    int64_t index = -1;   // kStackedExpert: the expert; kFusedAttnRes: 0 norm, 1 projection
};

}   // namespace kimi
