// The AMX tile matrix product, written once over a tile policy: included by amx_matmul.cpp with
// the emulated tiles (amx_tile.h, every machine) and by kernels/amx_matmul_hw.cpp with the real
// instructions (-mamx-tile -mamx-bf16). Both run the same plan, so op_tests check the packing,
// blocking, tails and shapes everywhere, and the hardware adds only the instructions.
// The order it computes is "The tile order" (matmul_kernel.h); ref: docs/performance.md#amx.
//
// Tile registers: 0..3 the f32 accumulators C (tile 2i + j = A_i · B_j), 4..5 A_0, A_1 (16
// weight rows × 32 bf16 each: rows as stored for bf16 weights, decoded for MXFP4), 6..7 B_0, B_1
// (16 pairs × up to 16 tokens: the activation panel). A block of work is up to 32 weight rows ×
// 32 tokens; its shape (rows m_i of A_i and C_i·, tokens nt_j of B_j and C_·j) is the tile
// configuration, loaded again only when it changes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu::amx_body {

constexpr int64_t kStepElems = 32;   // bf16 per A-tile row: one TDPBF16PS step of the reduction

struct Shape {
    int m[2] = {0, 0};    // weight rows of A_0, A_1 (0: unused)
    int nt[2] = {0, 0};   // tokens of B_0, B_1 (0: unused)
    bool operator==(const Shape&) const = default;
};

// E2M1 codes as bf16 bits: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
constexpr uint16_t kE2m1Bf16[16] = {0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
                                    0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0};

// Weight rows [row0, row0 + n) of an MXFP4 matrix decoded exactly to bf16 into dec, in tiles:
// rows of 16 (tile i = rows 16i..16i+15), then step s, then the 16 rows × 32 columns (64 bytes a
// row), zero past I and past the last row. A value is E2M1 × 2^(scale − 127): for scale bytes in
// [2, 252] an exponent add on the code's bits (the result stays a normal bf16), otherwise the
// exact decode of mxfp4_element (denormal, infinite or NaN as it falls).
inline void decode_mxfp4_tiles(const MatmulArgs& a, int64_t row0, int64_t n, int64_t steps, uint16_t* dec) {
    const int64_t in = a.in, groups = in / kMxfp4Group;
    const auto* packed = static_cast<const uint8_t*>(a.w);
    for (int64_t r = 0; r < (n + 15) / 16 * 16; ++r) {
        uint16_t* tile_row = dec + (r / 16) * steps * 512 + (r % 16) * kStepElems;   // step s at + s·512
        if (r >= n) {
            for (int64_t s = 0; s < steps; ++s) std::memset(tile_row + s * 512, 0, 64);
            continue;
        }
        const uint8_t* p = packed + (row0 + r) * (in / 2);
        const uint8_t* sc = a.w_scale + (row0 + r) * groups;
        for (int64_t s = 0; s < steps; ++s) {   // a step is one 32-element group
            uint16_t* out = tile_row + s * 512;
            if (s >= groups) {
                std::memset(out, 0, 64);
                continue;
            }
            const uint8_t scale = sc[s];
            const uint8_t* q = p + s * 16;
            if (scale >= 2 && scale <= 252) {
                const uint16_t add = uint16_t((int(scale) - 127) * 128);
                for (int e = 0; e < 32; ++e) {
                    const uint8_t code = (e & 1) ? uint8_t(q[e / 2] >> 4) : uint8_t(q[e / 2] & 15);
                    out[e] = uint16_t(kE2m1Bf16[code] + ((code & 7) ? add : 0));
                }
            } else {
                for (int e = 0; e < 32; ++e) out[e] = f32_to_bf16(mxfp4_element(q, &scale, e));
            }
        }
    }
}

// Per-thread buffers: the decoded MXFP4 rows of a row block, the zero-padded last step of two
// bf16 row tiles, and one stored C tile. Grown once to the largest product seen.
struct Buffers {
    std::vector<uint16_t> dec;
    alignas(64) uint16_t tail[2][16 * kStepElems];
    alignas(64) float c[16 * 16];
};
inline Buffers& buffers() {
    thread_local Buffers b;
    return b;
}

// Weight rows a row block holds: the block's A rows (bf16 as stored, or decoded) stay in half
// of this core's L2 while every token block passes over them; 32 to 512 rows.
inline int64_t row_block(int64_t steps) {
    const int64_t bytes = std::max<int64_t>(int64_t(cache_sizes().l2) / 2, int64_t(128) << 10);
    return std::clamp<int64_t>(bytes / (steps * 64) / 32 * 32, 32, 512);
}

// One step of the reduction over a block: the A and B tiles in use loaded, then C_ij += A_i · B_j.
template <class Tiles>
inline void step(Tiles& tl, const Shape& sh, const uint16_t* a0, const uint16_t* a1, int64_t a_stride,
                 const uint16_t* b0, const uint16_t* b1, const int64_t* b_stride) {
    tl.template load<4>(a0, a_stride);
    tl.template load<6>(b0, b_stride[0]);
    tl.template dp<0, 4, 6>();
    if (sh.nt[1]) {
        tl.template load<7>(b1, b_stride[1]);
        tl.template dp<1, 4, 7>();
    }
    if (sh.m[1]) {
        tl.template load<5>(a1, a_stride);
        tl.template dp<2, 5, 6>();
        if (sh.nt[1]) tl.template dp<3, 5, 7>();
    }
}

// y[t, o] for the rows t < a.n_rows and o in [o_begin, o_end): bf16 or MXFP4 weights, the
// activations as the tile panel (MatmulArgs::xt).
template <class Tiles>
void range(Tiles& tl, const MatmulArgs& a, int64_t o_begin, int64_t o_end) {
    const int64_t in = a.in, n = a.n_rows;
    const int64_t steps = (in + kStepElems - 1) / kStepElems, full = in / kStepElems;
    const int64_t n_blocks = (n + 15) / 16;   // token blocks of 16
    const bool mx = a.w_dtype == DType::kMXFP4;
    const auto* w = static_cast<const uint16_t*>(a.w);
    const int64_t rb = row_block(steps);
    Buffers& buf = buffers();
    if (mx && int64_t(buf.dec.size()) < rb * steps * kStepElems + 32)
        buf.dec.resize(size_t(rb * steps * kStepElems + 32));
    uint16_t* dec = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(buf.dec.data()) + 63) & ~uintptr_t(63));
    Shape cur;
    tl.begin();
    for (int64_t b0 = o_begin; b0 < o_end; b0 += rb) {
        const int64_t b1 = std::min(o_end, b0 + rb);
        if (mx) decode_mxfp4_tiles(a, b0, b1 - b0, steps, dec);
        for (int64_t j0 = 0; j0 < n_blocks; j0 += 2) {   // a pair of token blocks
            Shape sh;
            sh.nt[0] = int(std::min<int64_t>(16, n - 16 * j0));
            sh.nt[1] = int(std::clamp<int64_t>(n - 16 * (j0 + 1), 0, 16));
            const uint16_t* bp[2];   // step 0 of each token block's panel; step s at + s·16·2·nt
            for (int j = 0; j < 2; ++j) bp[j] = a.xt + (j0 + j) * steps * 16 * kStepElems;
            for (int64_t r = b0; r < b1; r += 32) {   // a pair of row tiles
                sh.m[0] = int(std::min<int64_t>(16, b1 - r));
                sh.m[1] = int(std::clamp<int64_t>(b1 - r - 16, 0, 16));
                if (!(sh == cur)) tl.configure(sh), cur = sh;
                // the A operand of row tile i at step s, and its stride in bytes
                const uint16_t* ap[2];
                int64_t a_stride;
                if (mx) {
                    for (int i = 0; i < 2; ++i) ap[i] = dec + ((r - b0) / 16 + i) * steps * 512;
                    a_stride = 64;
                } else {
                    for (int i = 0; i < 2; ++i) ap[i] = w + (r + 16 * i) * in;
                    a_stride = 2 * in;
                    if (full < steps)   // the last step zero-padded (I % 32 ≠ 0), once per row pair
                        for (int i = 0; i < 2; ++i)
                            for (int m = 0; m < 16; ++m) {
                                uint16_t* t = buf.tail[i] + m * kStepElems;
                                std::memset(t, 0, 64);
                                if (m < sh.m[i])
                                    std::memcpy(t, ap[i] + m * in + full * kStepElems,
                                                size_t(2 * (in - full * kStepElems)));
                            }
                }
                tl.zero(sh);
                const int64_t b_stride[2] = {4 * sh.nt[0], 4 * std::max(sh.nt[1], 1)};
                for (int64_t s = 0; s < steps; ++s) {
                    const bool direct = mx || s < full;
                    const int64_t as = direct ? a_stride : 64;
                    const uint16_t* a0 = mx ? ap[0] + s * 512 : s < full ? ap[0] + s * kStepElems : buf.tail[0];
                    const uint16_t* a1 = mx ? ap[1] + s * 512 : s < full ? ap[1] + s * kStepElems : buf.tail[1];
                    if (!mx && s + 4 < full)
                        tl.prefetch_rows(ap[0] + (s + 4) * kStepElems, a_stride, sh.m[0] + sh.m[1]);
                    step(tl, sh, a0, a1, as, bp[0] + s * 16 * 2 * sh.nt[0], bp[1] + s * 16 * 2 * sh.nt[1], b_stride);
                }
                // C_ij → y: tile rows are weight rows, columns tokens
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) {
                        if (sh.m[i] == 0 || sh.nt[j] == 0) continue;
                        tl.store(2 * i + j, buf.c);
                        const int64_t t0 = 16 * (j0 + j), o0 = r + 16 * i;
                        for (int t = 0; t < sh.nt[j]; ++t)
                            for (int m = 0; m < sh.m[i]; ++m) a.y[(t0 + t) * a.ldy + o0 + m] = buf.c[m * 16 + t];
                    }
            }
        }
    }
    tl.end();
}

}   // namespace kimi::cpu::amx_body
