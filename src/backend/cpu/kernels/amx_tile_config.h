// LDTILECFG's operand, and the compiler barrier the tile intrinsics need: shared by the AMX
// translation units (amx_hw.cpp, amx_matmul_hw.cpp), each compiled with -mamx-tile -mamx-bf16.
#pragma once
#include <cstdint>

namespace kimi::cpu {

struct alignas(64) TileConfig {   // LDTILECFG's 64-byte operand, palette 1
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// why: GCC 12's tile intrinsics do not tell the compiler what memory they read or write
// (LDTILECFG's operand is declared as 8 bytes, TILELOADD's and TILESTORED's as none), so stores
// that fill a config or a buffer could sink past the instruction, and loads after a TILESTORED
// could be hoisted above it. A compiler barrier on each side keeps memory in program order; the
// pointer the instruction will read is handed to it, so its object counts as escaped there.
inline void tile_memory_barrier(const void* p = nullptr) { __asm__ volatile("" : : "r"(p) : "memory"); }

}   // namespace kimi::cpu
