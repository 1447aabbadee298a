// Real AMX tiles (see amx_support.h): one TDPBF16PS, what the emulation of amx_tile.h is held
// to on machines that have the tiles; and the tile peak loop of `bench machine`
// (machine_probe.h). Compiled with -mamx-tile -mamx-bf16; called only when amx_support().usable.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/amx_support.h"
#include "backend/cpu/kernels/amx_tile_config.h"
#include "backend/cpu/machine_probe.h"

namespace kimi::cpu {

void tdpbf16ps_hw(float* c, int m, int n, const uint16_t* a, const uint16_t* b, int k) {
    TileConfig cfg;
    cfg.rows[0] = uint8_t(m), cfg.colsb[0] = uint16_t(4 * n);   // c
    cfg.rows[1] = uint8_t(m), cfg.colsb[1] = uint16_t(4 * k);   // a
    cfg.rows[2] = uint8_t(k), cfg.colsb[2] = uint16_t(4 * n);   // b
    tile_memory_barrier(&cfg);
    _tile_loadconfig(&cfg);
    _tile_loadd(0, c, 4 * n);
    _tile_loadd(1, a, 4 * k);
    _tile_loadd(2, b, 4 * n);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, c, 4 * n);
    _tile_release();
}

// Palette 1 at full size: tmm0..3 the f32 accumulators C (16 rows × 16 f32), tmm4..5 A
// (16 rows × 32 bf16, 16 pairs), tmm6..7 B (16 rows of pairs × 16 columns). TDPBF16PS wants
// C.rows = A.rows, C.colsb = B.colsb and A.colsb = 4 · B.rows: 16, 64 and 64 = 4 · 16 here.
// Each TDPBF16PS is 16 × 16 outputs × 32 products; the four per iteration are independent
// (c0 += a0·b0, c1 += a0·b1, c2 += a1·b0, c3 += a1·b1), so the loop runs at the unit's
// throughput rather than its latency. Every calling thread configures its own tiles.
PeakResult amx_bf16_loop(int64_t n_iter) {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    alignas(64) uint16_t a[16 * 32], b[16 * 32];
    for (uint16_t& v : a) v = 0x33d6;   // bf16 1e-7: the sums stay small and normal
    for (uint16_t& v : b) v = 0x3f80;   // bf16 1.0
    alignas(64) float c[4][16 * 16];
    tile_memory_barrier(&cfg);
    tile_memory_barrier(a);
    tile_memory_barrier(b);
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    for (int64_t i = 0; i < n_iter; ++i) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
    _tile_release();
    PeakResult r;
    r.flops = double(n_iter) * 4 * 2 * 16 * 16 * 32;
    r.sink = c[0][0] + c[1][17] + c[2][34] + c[3][255];
    r.isa = "amx-bf16 (tdpbf16ps)";
    return r;
}

}   // namespace kimi::cpu
