// One TDPBF16PS on real AMX tiles (see amx_support.h): what the emulation of amx_tile.h is held
// to on machines that have the tiles. Compiled with -mamx-tile -mamx-bf16; called only when
// amx_support().usable.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/amx_support.h"

namespace kimi::cpu {

namespace {

struct alignas(64) TileConfig {   // LDTILECFG's 64-byte operand, palette 1
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

}   // namespace

void tdpbf16ps_hw(float* c, int m, int n, const uint16_t* a, const uint16_t* b, int k) {
    TileConfig cfg;
    cfg.rows[0] = uint8_t(m), cfg.colsb[0] = uint16_t(4 * n);   // c
    cfg.rows[1] = uint8_t(m), cfg.colsb[1] = uint16_t(4 * k);   // a
    cfg.rows[2] = uint8_t(k), cfg.colsb[2] = uint16_t(4 * n);   // b
    _tile_loadconfig(&cfg);
    _tile_loadd(0, c, 4 * n);
    _tile_loadd(1, a, 4 * k);
    _tile_loadd(2, b, 4 * n);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, c, 4 * n);
    _tile_release();
}

}   // namespace kimi::cpu
