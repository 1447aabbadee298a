// The AMX tile semantics, emulated in portable C++: TILEZERO, TILELOADD, TDPBF16PS and TILESTORED
// as Intel's SDM defines them (a tile of up to 16 rows × 64 bytes, each configured with its own
// rows and bytes per row; TDPBF16PS multiplies bf16 pairs into f32). Tile plans (packing,
// blocking, tails, per-thread plans) run through this on every machine, so op_tests check them
// where the CPU has no tiles; where it has them, the real instructions must give the same bits
// (amx_tile_test: skipped with a printed reason elsewhere). ref: docs/performance.md#amx.
//
// TDPBF16PS, per output element c[m][n] (n counts f32 columns), for each pair k in order:
//   c += f32(a[m][2k]) · f32(b[k][2n]);  c += f32(a[m][2k+1]) · f32(b[k][2n+1])
// each product exact (8-bit significands, no intermediate rounding even where it would underflow
// f32), each sum rounded to nearest even; bf16 inputs
// that are denormal count as zero, and f32 results that are denormal are flushed to zero.
#pragma once
#include <cstdint>

namespace kimi::cpu::amx {

constexpr int kMaxRows = 16;
constexpr int kMaxColsb = 64;   // bytes per row: 16 f32, or 32 bf16 (16 pairs)

// One tile register as configured (LDTILECFG): rows and bytes per row, and its data; what
// lies past rows × colsb is zero after every instruction that writes the tile.
struct Tile {
    int rows = 0, colsb = 0;
    alignas(64) uint8_t data[kMaxRows][kMaxColsb] = {};

    float f32(int m, int n) const;       // column n of row m as f32
    uint16_t bf16(int m, int j) const;   // element j of row m as bf16 bits
};

// TILEZERO: the configured shape, all bytes zero.
void tile_zero(Tile& t, int rows, int colsb);
// TILELOADD: `rows` rows of `colsb` bytes, `stride` bytes apart, from base; the rest zeroed.
void tile_load(Tile& t, int rows, int colsb, const void* base, int64_t stride);
// TILESTORED: the tile's rows × colsb bytes to base, `stride` bytes apart.
void tile_store(const Tile& t, void* base, int64_t stride);
// TDPBF16PS c += a · b: a is [M, 2K] bf16 (colsb 4K), b is K rows of N bf16 pairs (colsb 4N),
// c is [M, N] f32 (colsb 4N). Throws kimi::Error on shapes the instruction refuses (#UD).
void tdpbf16ps(Tile& c, const Tile& a, const Tile& b);

}   // namespace kimi::cpu::amx
