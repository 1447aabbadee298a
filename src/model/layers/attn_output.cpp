// The attention output hook (see attn_output.h).
#include "model/layers/attn_output.h"

#include <cstring>

#include "ops/ops.h"

namespace kimi {

Tensor attn_o_proj(Exec& ex, const Tensor& o, const Tensor& w_o) {
    Tensor out = ex.arena->alloc_f32({o.dim(0), w_o.dim(0)});   // [T, D]
    ops::matmul(ex, o, w_o, ex.precision, out);
    ex.trace.o_proj_output = out.data;
    return out;
}

Tensor residual_addend(Exec& ex, const Tensor& attn) {
    Tensor addend = attn;
    if (ex.attn_output == AttnOutputMode::kCopy) {
        addend = ex.arena->alloc_f32({attn.dim(0), attn.dim(1)});
        std::memcpy(addend.data, attn.data, attn.nbytes());
        ++ex.counters.attn_output_copies;
    }
    ex.trace.residual_addend = addend.data;
    return addend;
}

}   // namespace kimi
