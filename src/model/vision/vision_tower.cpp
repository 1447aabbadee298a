// The vision tower's forward pass (see vision_tower.h). Attention runs head by head as two
// products over blocks of query rows — the scores (attention_scores: a kernel for the short
// reduction over a head's width), then the weighted values (a matrix product over the keys) —
// so the scores of one block of queries are all that is held at once.
#include "model/vision/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/arena.h"
#include "ops/ops.h"

namespace kimi {

namespace {

constexpr int64_t kQueryBlock = 256;   // query rows per score block

// Source index and weights of output index i when resampling n_in → n_out (half-pixel
// centres; a negative source coordinate is clamped to 0, the upper neighbour to n_in − 1).
struct Tap {
    int64_t i0, i1;
    float w0, w1;
};
Tap tap(int64_t i, int64_t n_in, int64_t n_out) {
    const float scale = float(n_in) / float(n_out);
    const float src = std::max(0.0f, scale * (float(i) + 0.5f) - 0.5f);
    const int64_t i0 = std::min(int64_t(src), n_in - 1);
    const int64_t i1 = std::min(i0 + 1, n_in - 1);
    const float w1 = src - float(i0);
    return {i0, i1, 1.0f - w1, w1};
}

// A product whose own scratch (the activations rounded to bf16) goes to ex.layer_arena, reset
// after it, when there is one: an image's thousands of products would otherwise pile their
// scratch up in the step arena.
template <class Fn>
void with_scratch(Exec& ex, Fn&& fn) {
    if (!ex.layer_arena) return fn();
    Arena* const step = ex.arena;
    ex.arena = ex.layer_arena;
    fn();
    ex.arena = step;
    ex.layer_arena->reset();
}

void linear(Exec& ex, const Tensor& x, const Tensor& w, Tensor& y) {
    with_scratch(ex, [&] { ops::matmul(ex, x, w, ex.precision, y); });
}

// Bidirectional multi-head attention over the n tokens of one image.
// qkv: [n, 3Q] (rotated q, k, then v) → out: [n, Q]. A head's keys and values are copied out
// as the products' operands: bf16 at bf16 precision (as the activations are rounded), f32
// otherwise.
void attention(Exec& ex, const Tensor& qkv, int64_t heads, int64_t hd, Tensor& out) {
    const int64_t n = qkv.dim(0), q_dim = heads * hd, ld = 3 * q_dim;
    const DType wt = ex.precision == Precision::kBF16 ? DType::kBF16 : DType::kF32;
    Tensor k = ex.arena->alloc(wt, {n, hd});                         // [n, hd] one head's keys
    Tensor v = ex.arena->alloc(wt, {n, hd});                         // [n, hd] its values
    Tensor s = ex.arena->alloc_f32({std::min(n, kQueryBlock), n});   // [block, n] scores
    const float scale = 1.0f / std::sqrt(float(hd));
    const auto put = [wt](Tensor& t, int64_t i, float v) {
        if (wt == DType::kBF16)
            static_cast<uint16_t*>(t.data)[i] = f32_to_bf16(v);
        else
            t.f32()[i] = v;
    };
    for (int64_t h = 0; h < heads; ++h) {
        const float* src = qkv.f32();
        ex.pool->parallel_for(n, [&](int64_t t) {
            for (int64_t j = 0; j < hd; ++j) {
                put(k, t * hd + j, src[t * ld + q_dim + h * hd + j]);
                put(v, t * hd + j, src[t * ld + 2 * q_dim + h * hd + j]);
            }
        });
        for (int64_t q0 = 0; q0 < n; q0 += kQueryBlock) {
            const int64_t rows = std::min(kQueryBlock, n - q0);
            Tensor sb = s.rows(0, rows);   // [rows, n]
            with_scratch(
                ex, [&] { ops::attention_scores(ex, src + q0 * ld + h * hd, rows, ld, k, ex.precision, sb.f32(), n); });
            ops::softmax_rows(ex, sb, scale);
            with_scratch(ex, [&] {
                ops::attention_values(ex, sb.f32(), rows, n, v, ex.precision, out.f32() + q0 * q_dim + h * hd, q_dim);
            });
        }
    }
}

}   // namespace

void interpolate_pos_emb(const Tensor& grid, int64_t grid_h, int64_t grid_w, Tensor& pos) {
    const int64_t gh = grid.dim(0), gw = grid.dim(1), d = grid.dim(2);
    const float* g = grid.f32();
    if (gh == grid_h && gw == grid_w) {
        std::memcpy(pos.f32(), g, size_t(gh * gw * d) * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < grid_h; ++r) {
        const Tap tr = tap(r, gh, grid_h);
        for (int64_t c = 0; c < grid_w; ++c) {
            const Tap tc = tap(c, gw, grid_w);
            const float* a = g + (tr.i0 * gw + tc.i0) * d;
            const float* b = g + (tr.i0 * gw + tc.i1) * d;
            const float* e = g + (tr.i1 * gw + tc.i0) * d;
            const float* f = g + (tr.i1 * gw + tc.i1) * d;
            float* y = pos.f32() + (r * grid_w + c) * d;
            for (int64_t j = 0; j < d; ++j)
                y[j] = tr.w0 * (tc.w0 * a[j] + tc.w1 * b[j]) + tr.w1 * (tc.w0 * e[j] + tc.w1 * f[j]);
        }
    }
}

Tensor encode_image(Exec& ex, const VisionConfig& c, const VisionWeights& w, const Tensor& patches, int64_t grid_h,
                    int64_t grid_w, const VisionProgress& progress) {
    const int64_t n = grid_h * grid_w, d = c.hidden, q = c.qkv_dim, m = c.merge;
    KIMI_CHECK(patches.rank == 2 && patches.dim(0) == n && patches.dim(1) == c.patch_dim(), "encode_image: patches");
    KIMI_CHECK(grid_h % m == 0 && grid_w % m == 0, "encode_image: grid sides must be multiples of the merge");

    Tensor x = ex.arena->alloc_f32({n, d});   // [n, D] the tower's residual stream
    linear(ex, patches, w.patch, x);
    Tensor pos = ex.arena->alloc_f32({n, d});   // [n, D]
    interpolate_pos_emb(w.pos_emb, grid_h, grid_w, pos);
    ops::add_inplace(ex, x, pos);

    Tensor xn = ex.arena->alloc_f32({n, d});                 // [n, D]
    Tensor qkv = ex.arena->alloc_f32({n, 3 * q});            // [n, 3Q]
    Tensor att = ex.arena->alloc_f32({n, q});                // [n, Q]
    Tensor hid = ex.arena->alloc_f32({n, c.intermediate});   // [n, I]
    Tensor y = pos;                                          // [n, D] each sublayer's output (pos is spent)
    int64_t done = 0;
    for (const VisionBlockWeights& b : w.blocks) {
        ops::rms_norm(ex, x, b.norm0, c.norm_eps, xn);
        linear(ex, xn, b.wqkv, qkv);
        ops::rope_2d(ex, qkv, c.n_heads, c.head_dim(), grid_w);
        attention(ex, qkv, c.n_heads, c.head_dim(), att);
        linear(ex, att, b.wo, y);
        ops::add_inplace(ex, x, y);
        ops::rms_norm(ex, x, b.norm1, c.norm_eps, xn);
        linear(ex, xn, b.fc0, hid);
        ops::gelu_inplace(ex, hid, /*tanh_approx=*/true);
        linear(ex, hid, b.fc1, y);
        ops::add_inplace(ex, x, y);
        if (progress) progress(++done, int64_t(w.blocks.size()));
    }
    ops::rms_norm(ex, x, w.final_norm, c.norm_eps, x);

    // 2×2 merge: cell (r, c) is the patches (2r, 2c), (2r, 2c+1), (2r+1, 2c), (2r+1, 2c+1) side by side.
    const int64_t cells_h = grid_h / m, cells_w = grid_w / m, n_out = cells_h * cells_w, md = c.merged_dim();
    Tensor merged = ex.arena->alloc_f32({n_out, md});   // [N, 4D]
    for (int64_t r = 0; r < cells_h; ++r)
        for (int64_t cc = 0; cc < cells_w; ++cc)
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < m; ++j)
                    std::memcpy(merged.f32() + (r * cells_w + cc) * md + (i * m + j) * d,
                                x.f32() + ((r * m + i) * grid_w + cc * m + j) * d, size_t(d) * sizeof(float));

    Tensor up = ex.arena->alloc_f32({n_out, md});   // [N, 4D]
    linear(ex, merged, w.proj0, up);
    ops::gelu_inplace(ex, up, /*tanh_approx=*/false);
    Tensor out = ex.arena->alloc_f32({n_out, c.text_hidden});   // [N, text hidden]
    linear(ex, up, w.proj2, out);
    ops::rms_norm(ex, out, w.post_norm, c.projector_eps, out);
    return out;
}

}   // namespace kimi
