// matmul: splits the output columns into blocks over the thread pool and runs the kernel
// chosen at start-up. bf16 mode rounds the activations once into an arena copy first (for
// MXFP4 weights on AVX-512 BF16 in the kernel's span order, matmul_kernel.h).
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul_kernel.h"
#include "core/quant_blocks.h"

namespace kimi::cpu {

bool kernel_takes_bf16_bits(DType w_dtype) {
    if (use_amx() && (w_dtype == DType::kBF16 || w_dtype == DType::kMXFP4)) return true;
    return use_avx512_bf16() && (w_dtype == DType::kBF16 || w_dtype == DType::kMXFP4 || block_type_takes_bf16(w_dtype));
}

void bf16_round_rows_portable(const float* x, int64_t n_rows, int64_t ldx, int64_t in, float* xr, uint16_t* xb) {
    bf16_round_rows_body(x, n_rows, ldx, in, xr, xb);
}

namespace {
float* thread_scratch(int64_t in) {
    // note: grows once per thread to the largest I seen; steady-state steps never allocate.
    struct Aligned {
        std::vector<float> buf;
        float* at = nullptr;
    };
    thread_local Aligned s;
    const int64_t kernel = std::max(matmul_scratch_floats(in), use_avx512_bf16() ? outer_scratch_floats() : 0);
    const int64_t n = kernel + kMatmulColumnBlock * in + 16;   // + decoded block-type rows
    if (int64_t(s.buf.size()) < n) {
        s.buf.resize(size_t(n));
        s.at = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(s.buf.data()) + 63) & ~uintptr_t(63));
    }
    return s.at;
}
}   // namespace

// Block-quantized weights (GGUF), docs/gguf.md#types. With bf16 activation bits (xb: the types
// of block_type_takes_bf16 on AVX-512 BF16) the factored product. Otherwise a chunk of rows at a
// time (an eighth of this core's L2 of f32, 4 to kMatmulColumnBlock rows) is decoded exactly to
// f32 in the thread's scratch (after the kernel's own; 16 values per instruction for the common
// types on AVX-512), then multiplied by the kernel as F32 weights: each output gets the F32
// kernel's fixed order over the values the file encodes, so the result equals an F32 weight
// holding the decoded values whatever the o range, rows or thread, and a prefill decodes each
// weight row once per product, not once per token.
void block_quant_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch, MatmulKernel kernel) {
    if (a.xq && block_lanes_range_avx512(a, o_begin, o_end, scratch + matmul_scratch_floats(a.in)))
        return;   // bf16 activations in the sub-block lane order: the factored product
    if (a.xb && block_bf16_range_avx512(a, o_begin, o_end, scratch + matmul_scratch_floats(a.in)))
        return;   // bf16 activations: the factored product
    const BlockShape b = dtype_block(a.w_dtype);
    const int64_t in = a.in, row_bytes = in / b.elems * b.bytes;
    // rows per chunk: the decoded rows stay in L2 while the kernel reads them back
    static const int64_t decoded_bytes = std::max<int64_t>(int64_t(cache_sizes().l2) / 8, int64_t(32) << 10);
    const int64_t chunk = std::clamp<int64_t>(decoded_bytes / (4 * in) / 4 * 4, 4, kMatmulColumnBlock);
    const bool vector = use_avx512();
    float* rows = scratch + matmul_scratch_floats(in);
    MatmulArgs f = a;
    f.w = rows;
    f.w_dtype = DType::kF32;
    f.w_scale = nullptr;
    f.xb = f.xp = nullptr;
    for (int64_t o = o_begin; o < o_end; o += chunk) {
        const int64_t n = std::min(chunk, o_end - o);
        const char* src = static_cast<const char*>(a.w) + o * row_bytes;
        if (!vector || !dequantize_blocks_avx512(a.w_dtype, src, rows, n * in))
            dequantize_blocks(a.w_dtype, src, rows, n * in);
        f.y = a.y + o;   // the kernel writes y[t·ldy + o'] for its outputs o' in [0, n)
        kernel(f, 0, n, scratch);
    }
}

namespace {
// The kernel, or the block-type path around it.
void run_range(MatmulKernel kernel, const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (is_block_quant(a.w_dtype)) return block_quant_range(a, o_begin, o_end, scratch, kernel);
    kernel(a, o_begin, o_end, scratch);
}
}   // namespace

// The tiles where they run, else the kernel of the ISA chosen at start-up.
MatmulKernel matmul_kernel() { return use_amx() ? matmul_range_amx : vector_kernel(); }

MatmulKernel vector_kernel() {
    switch (matmul_isa()) {
        case Isa::kAvx512: return matmul_range_avx512;
        case Isa::kAvx2: return matmul_range_avx2;
        default: return matmul_range_scalar;
    }
}

namespace {
// bf16 activations: the rows rounded once into the arena, as bf16 bits for a kernel that
// multiplies bf16 pairs natively (kernel_takes_bf16_bits): in natural order for bf16 weights
// (xb), in the span order for MXFP4 weights (xp), in a sub-block lane order with the sub-block
// sums for Q4_K and Q6_K (xq, xq_sums: one per lane family); as f32 values for the others (x).
struct RoundedRows {
    const float* x = nullptr;
    const uint16_t* xb = nullptr;
    const uint32_t* xv = nullptr;     // the activation panel of every group with more than
    const int64_t* xv_at = nullptr;   // kOuterDirectMaxRows rows, group g's from xv + xv_at[g]
    const uint16_t* xp = nullptr;
    const uint16_t* xt = nullptr;   // the tile panel of all rows, group by group (pack_amx_panel)
    const uint16_t* xq[kLaneFamilies] = {};
    const float* xq_sums[kLaneFamilies] = {};
};
struct RowForms {   // which forms round_rows makes (bf16 weights: the bits, and the panel of large groups)
    bool bits = false, spans = false, values = false, lanes[kLaneFamilies] = {};
    void add(DType w_dtype) {
        if (use_amx() && (w_dtype == DType::kBF16 || w_dtype == DType::kMXFP4))
            bits = tiles = true;
        else if (!kernel_takes_bf16_bits(w_dtype))
            values = true;
        else if (w_dtype == DType::kMXFP4)
            spans = true;
        else if (lane_family(w_dtype) >= 0)
            lanes[lane_family(w_dtype)] = true;
        else
            bits = true, panel = panel || w_dtype == DType::kBF16;
    }
    bool panel = false, tiles = false;
};

// The form a's weight type takes, for group g (rows from r0).
void give_rows(MatmulArgs& a, const RoundedRows& r, int64_t r0, int64_t g) {
    const int64_t in = a.in;
    const int f = lane_family(a.w_dtype);
    if (r.xt && (a.w_dtype == DType::kBF16 || a.w_dtype == DType::kMXFP4)) {
        a.xt = r.xt + r0 * amx_panel_elems(1, in);
        a.xb = r.xb + r0 * in;
    } else if (r.xv && a.w_dtype == DType::kBF16 && a.n_rows > kOuterDirectMaxRows) {
        a.xv = r.xv + r.xv_at[g];
        a.xb = r.xb + r0 * in;   // (the tails)
    } else if (r.xp && a.w_dtype == DType::kMXFP4) {
        a.xp = r.xp + r0 * in;
    } else if (f >= 0 && r.xq[f]) {
        a.xq = r.xq[f] + r0 * in;
        a.xq_sums = r.xq_sums[f] + r0 * (in / lane_sub_elems(f));
    } else if (r.xb && kernel_takes_bf16_bits(a.w_dtype)) {
        a.xb = r.xb + r0 * in;
    }
}

// The activation panels (pack_token_pairs_avx512) of the groups (rows starts[g] .. starts[g + 1] of xb)
// with more than kOuterDirectMaxRows rows, for bf16 weights; none where no group has as many.
void pack_panels(Exec& ex, const uint16_t* xb, int64_t in, std::span<const int32_t> starts, RoundedRows& r) {
    const int64_t n_groups = int64_t(starts.size()) - 1;
    auto* at = static_cast<int64_t*>(ex.arena->alloc_bytes(size_t(n_groups + 1) * sizeof(int64_t)));
    auto* blocks = static_cast<int64_t*>(ex.arena->alloc_bytes(size_t(n_groups + 1) * sizeof(int64_t)));
    at[0] = blocks[0] = 0;
    for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t n = starts[size_t(g) + 1] - starts[size_t(g)];
        const bool panel = n > kOuterDirectMaxRows;
        at[g + 1] = at[g] + (panel ? panel_dwords(n, in) : 0);
        blocks[g + 1] = blocks[g] + (panel ? (n + 15) / 16 : 0);   // tasks of 16 rows
    }
    if (blocks[n_groups] == 0) return;
    auto* xv = static_cast<uint32_t*>(ex.arena->alloc_bytes(size_t(at[n_groups]) * sizeof(uint32_t)));
    ex.pool->parallel_ranges(blocks[n_groups], [&](int64_t b0, int64_t b1, int) {
        for (int64_t b = b0; b < b1; ++b) {   // token block b: block b − blocks[g] of group g
            const int64_t g = std::upper_bound(blocks, blocks + n_groups + 1, b) - blocks - 1;
            const int64_t tb = b - blocks[g], r0 = starts[size_t(g)] + 16 * tb;
            const int64_t n = std::min<int64_t>(16, starts[size_t(g) + 1] - r0);
            pack_token_pairs_avx512(xb + r0 * in, n, in, xv + at[g] + panel_dwords(16 * tb, in));
        }
    });
    r.xv = xv;
    r.xv_at = at;
}

// The tile panel (pack_amx_panel) of each group (rows starts[g] .. starts[g + 1] of xb), group g's
// from row starts[g]'s place: blocks of 16 rows from each group's first.
void pack_tile_panels(Exec& ex, const uint16_t* xb, int64_t in, std::span<const int32_t> starts, RoundedRows& r) {
    const int64_t n_groups = int64_t(starts.size()) - 1, n_rows = starts[size_t(n_groups)];
    auto* xt = static_cast<uint16_t*>(ex.arena->alloc_bytes(size_t(amx_panel_elems(n_rows, in)) * sizeof(uint16_t)));
    auto* blocks = static_cast<int64_t*>(ex.arena->alloc_bytes(size_t(n_groups + 1) * sizeof(int64_t)));
    blocks[0] = 0;
    for (int64_t g = 0; g < n_groups; ++g)
        blocks[g + 1] = blocks[g] + (starts[size_t(g) + 1] - starts[size_t(g)] + 15) / 16;
    ex.pool->parallel_ranges(blocks[n_groups], [&](int64_t b0, int64_t b1, int) {
        for (int64_t b = b0; b < b1; ++b) {   // token block b: block b − blocks[g] of group g
            const int64_t g = std::upper_bound(blocks, blocks + n_groups + 1, b) - blocks - 1;
            const int64_t r0 = starts[size_t(g)] + 16 * (b - blocks[g]);
            const int64_t n = std::min<int64_t>(16, starts[size_t(g) + 1] - r0);
            pack_amx_panel(xb + r0 * in, n, in, xt + r0 * amx_panel_elems(1, in));
        }
    });
    r.xt = xt;
}

RoundedRows round_rows(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, int64_t in, RowForms want,
                       std::span<const int32_t> starts) {
    const auto alloc = [&](size_t elem, bool want) {
        return want ? ex.arena->alloc_bytes(size_t(n_rows * in) * elem) : nullptr;
    };
    float* xr = static_cast<float*>(alloc(sizeof(float), want.values));
    uint16_t* xb = static_cast<uint16_t*>(alloc(sizeof(uint16_t), want.bits));
    uint16_t* xp = static_cast<uint16_t*>(alloc(sizeof(uint16_t), want.spans));   // only with AVX-512 BF16
    RoundedRows r{xr, xb};
    r.xp = xp;
    uint16_t* xq[kLaneFamilies] = {};
    float* xq_sums[kLaneFamilies] = {};
    for (int f = 0; f < kLaneFamilies; ++f) {   // only with AVX-512 BF16
        if (!want.lanes[f]) continue;
        r.xq[f] = xq[f] = static_cast<uint16_t*>(alloc(sizeof(uint16_t), true));
        r.xq_sums[f] = xq_sums[f] =
            static_cast<float*>(ex.arena->alloc_bytes(size_t(n_rows * (in / lane_sub_elems(f))) * sizeof(float)));
    }
    const int64_t per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(in, 1));   // rows per task
    const auto round = use_avx512() ? bf16_round_rows_avx512 : bf16_round_rows_portable;
    ex.pool->parallel_ranges((n_rows + per_task - 1) / per_task, [&](int64_t c0, int64_t c1, int) {
        const int64_t t0 = c0 * per_task, t1 = std::min(n_rows, c1 * per_task);
        if (xr || xb) round(x + t0 * ldx, t1 - t0, ldx, in, xr ? xr + t0 * in : nullptr, xb ? xb + t0 * in : nullptr);
        if (xp) bf16_round_rows_spans_avx512(x + t0 * ldx, t1 - t0, ldx, in, xp + t0 * in);
        for (int f = 0; f < kLaneFamilies; ++f)
            if (xq[f])
                bf16_round_rows_lanes_avx512(f, x + t0 * ldx, t1 - t0, ldx, in, xq[f] + t0 * in,
                                             xq_sums[f] + t0 * (in / lane_sub_elems(f)));
    });
    if (want.panel && n_rows > kOuterDirectMaxRows) pack_panels(ex, xb, in, starts, r);   // (decode: none)
    if (want.tiles) pack_tile_panels(ex, xb, in, starts, r);
    return r;
}
}   // namespace

void matmul_strided(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& w, Precision p, float* y,
                    int64_t ldy) {
    const int64_t out = w.dim(0), in = w.dim(1);
    if (n_rows == 0 || out == 0) return;
    RoundedRows r;
    if (p == Precision::kBF16) {
        RowForms want;
        want.add(w.dtype);
        const int32_t starts[2] = {0, int32_t(n_rows)};
        r = round_rows(ex, x, n_rows, ldx, in, want, starts);
        x = r.x;
        ldx = in;
    }
    MatmulArgs a{x, n_rows, ldx, w.data, w.dtype, in, y, ldy};
    a.w_scale = w.scale;
    give_rows(a, r, 0, 0);
    const MatmulKernel kernel = matmul_kernel();
    // Blocks of output columns; each column is computed entirely by one task.
    constexpr int64_t kBlock = kMatmulColumnBlock;
    const int64_t n_blocks = (out + kBlock - 1) / kBlock;
    ex.pool->parallel_ranges(n_blocks, [&](int64_t b0, int64_t b1, int) {
        float* scratch = thread_scratch(in);
        run_range(kernel, a, b0 * kBlock, std::min(out, b1 * kBlock), scratch);
    });
}

void matmul_grouped(Exec& ex, const Tensor& x, std::span<const Tensor* const> ws, std::span<const int32_t> starts,
                    Precision p, Tensor& y) {
    const int64_t in = x.dim(1), out = y.dim(1), n_groups = int64_t(ws.size());
    if (out == 0 || x.dim(0) == 0) return;
    const float* xs = x.f32();
    RoundedRows r;
    if (p == Precision::kBF16) {   // rounded once, as matmul rounds each row
        // each form some expert with tokens takes (RowForms)
        RowForms want;
        for (size_t g = 0; g < ws.size(); ++g)
            if (starts[g] != starts[g + 1]) want.add(ws[g]->dtype);
        r = round_rows(ex, xs, x.dim(0), in, in, want, starts);
        xs = r.x;
    }
    constexpr int64_t kBlock = kMatmulColumnBlock;   // as matmul_strided: each column block entirely by one task
    const int64_t per_group = (out + kBlock - 1) / kBlock;
    // Work items (block, group) over the non-empty groups, block-major: the pool's contiguous
    // split then gives every thread its share of every group, however unevenly tokens are
    // routed. A thread's items cover, for each group, one contiguous run of column blocks, so
    // it runs the kernel once per group over that run: the kernel's weight prefetch then
    // streams through the whole run instead of stopping at every 24-column block.
    int32_t* groups = static_cast<int32_t*>(ex.arena->alloc_bytes(size_t(n_groups) * sizeof(int32_t)));
    int64_t n_live = 0;
    for (int64_t g = 0; g < n_groups; ++g)
        if (starts[size_t(g)] != starts[size_t(g) + 1]) groups[n_live++] = int32_t(g);
    if (n_live == 0) return;
    const MatmulKernel kernel = matmul_kernel();
    float* ys = y.f32();
    ex.pool->parallel_ranges(per_group * n_live, [&](int64_t i0, int64_t i1, int) {
        float* scratch = thread_scratch(in);
        for (int64_t j = 0; j < n_live; ++j) {
            // Blocks b with item b * n_live + j in [i0, i1).
            const int64_t b0 = (i0 - j + n_live - 1) / n_live, b1 = (i1 - j + n_live - 1) / n_live;
            if (b0 >= b1) continue;
            const int64_t g = groups[j], r0 = starts[size_t(g)], r1 = starts[size_t(g) + 1];
            const Tensor& w = *ws[size_t(g)];
            MatmulArgs a{xs ? xs + r0 * in : nullptr, r1 - r0, in, w.data, w.dtype, in, ys + r0 * out, out};
            a.w_scale = w.scale;
            give_rows(a, r, r0, g);
            run_range(kernel, a, b0 * kBlock, std::min(out, b1 * kBlock), scratch);
        }
    });
}

void matmul(Exec& ex, const Tensor& x, const Tensor& w, Precision p, Tensor& y) {
    matmul_strided(ex, x.f32(), x.dim(0), x.dim(1), w, p, y.f32(), y.dim(1));
}

}   // namespace kimi::cpu
