// The AMX tile matrix product on the real instructions: the plan of amx_matmul_body.h with
// LDTILECFG / TILELOADD / TDPBF16PS / TILESTORED (this TU alone is compiled with -mamx-tile
// -mamx-bf16 and the AVX-512 set, so the MXFP4 decode and the copies vectorize). Called only
// when use_amx() holds on real tiles; each calling thread configures its own tiles and releases
// them at the end of its range.
#include <immintrin.h>

#include "backend/cpu/amx_matmul_body.h"
#include "backend/cpu/kernels/amx_tile_config.h"

namespace kimi::cpu {

namespace {

struct HwTiles {
    TileConfig cfg;
    void begin() {}
    void end() { _tile_release(); }
    void configure(const amx_body::Shape& s) {
        cfg = TileConfig{};
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j)
                if (s.m[i] && s.nt[j])
                    cfg.rows[2 * i + j] = uint8_t(s.m[i]), cfg.colsb[2 * i + j] = uint16_t(4 * s.nt[j]);
        for (int i = 0; i < 2; ++i)
            if (s.m[i]) cfg.rows[4 + i] = uint8_t(s.m[i]), cfg.colsb[4 + i] = 64;
        for (int j = 0; j < 2; ++j)
            if (s.nt[j]) cfg.rows[6 + j] = 16, cfg.colsb[6 + j] = uint16_t(4 * s.nt[j]);
        tile_memory_barrier(&cfg);
        _tile_loadconfig(&cfg);
    }
    // (GCC's tile intrinsics paste the register number into the instruction's text, so each
    // register the plan names is spelled out.)
    template <int T>
    void load(const void* p, int64_t stride) {
        static_assert(T >= 4 && T <= 7);
        tile_memory_barrier(p);
        if constexpr (T == 4) _tile_loadd(4, p, stride);
        if constexpr (T == 5) _tile_loadd(5, p, stride);
        if constexpr (T == 6) _tile_loadd(6, p, stride);
        if constexpr (T == 7) _tile_loadd(7, p, stride);
    }
    template <int C, int A, int B>
    void dp() {
        static_assert(C == 2 * (A - 4) + (B - 6));
        if constexpr (C == 0) _tile_dpbf16ps(0, 4, 6);
        if constexpr (C == 1) _tile_dpbf16ps(1, 4, 7);
        if constexpr (C == 2) _tile_dpbf16ps(2, 5, 6);
        if constexpr (C == 3) _tile_dpbf16ps(3, 5, 7);
    }
    void zero(const amx_body::Shape& s) {
        _tile_zero(0);
        if (s.nt[1]) _tile_zero(1);
        if (s.m[1]) _tile_zero(2);
        if (s.m[1] && s.nt[1]) _tile_zero(3);
    }
    void store(int c, float* p) {
        switch (c) {
            case 0: _tile_stored(0, p, 64); break;
            case 1: _tile_stored(1, p, 64); break;
            case 2: _tile_stored(2, p, 64); break;
            default: _tile_stored(3, p, 64); break;
        }
        tile_memory_barrier(p);
    }
    // One line of each of `rows` weight rows (a step ahead): a decode streams 32 rows at once.
    void prefetch_rows(const uint16_t* p, int64_t stride, int rows) {
        const char* c = reinterpret_cast<const char*>(p);
        for (int r = 0; r < rows; ++r) _mm_prefetch(c + r * stride, _MM_HINT_T0);
    }
};

}   // namespace

void amx_range_hw(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float*) {
    HwTiles tl;
    amx_body::range(tl, a, o_begin, o_end);
}

}   // namespace kimi::cpu
