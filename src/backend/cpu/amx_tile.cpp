// The AMX tile emulation (see amx_tile.h).
#include "backend/cpu/amx_tile.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"

namespace kimi::cpu::amx {

namespace {

void check_shape(int rows, int colsb, const char* what) {
    if (rows < 1 || rows > kMaxRows || colsb < 4 || colsb > kMaxColsb || colsb % 4 != 0)
        throw Error(std::string(what) + ": a tile of " + std::to_string(rows) + " rows x " + std::to_string(colsb) +
                    " bytes is not a valid configuration (1..16 rows, 4..64 bytes, a multiple of 4)");
}

// A bf16 value as f32, denormals as zero (DAZ).
float bf16_daz(uint16_t bits) {
    if ((bits & 0x7f80) == 0) bits &= 0x8000;
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// An f32 result, denormals flushed to a zero of the same sign (FTZ).
float ftz(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    std::memcpy(&f, &u, 4);
    return f;
}

}   // namespace

float Tile::f32(int m, int n) const {
    float f;
    std::memcpy(&f, &data[m][4 * n], 4);
    return f;
}

uint16_t Tile::bf16(int m, int j) const {
    uint16_t b;
    std::memcpy(&b, &data[m][2 * j], 2);
    return b;
}

void tile_zero(Tile& t, int rows, int colsb) {
    check_shape(rows, colsb, "TILEZERO");
    t.rows = rows;
    t.colsb = colsb;
    std::memset(t.data, 0, sizeof t.data);
}

void tile_load(Tile& t, int rows, int colsb, const void* base, int64_t stride) {
    tile_zero(t, rows, colsb);
    for (int m = 0; m < rows; ++m)
        std::memcpy(t.data[m], static_cast<const uint8_t*>(base) + m * stride, size_t(colsb));
}

void tile_store(const Tile& t, void* base, int64_t stride) {
    for (int m = 0; m < t.rows; ++m) std::memcpy(static_cast<uint8_t*>(base) + m * stride, t.data[m], size_t(t.colsb));
}

void tdpbf16ps(Tile& c, const Tile& a, const Tile& b) {
    if (c.rows != a.rows || c.colsb != b.colsb || a.colsb != 4 * b.rows)
        throw Error("TDPBF16PS: shapes c " + std::to_string(c.rows) + "x" + std::to_string(c.colsb) + ", a " +
                    std::to_string(a.rows) + "x" + std::to_string(a.colsb) + ", b " + std::to_string(b.rows) + "x" +
                    std::to_string(b.colsb) + " do not fit (c.rows = a.rows, c.colsb = b.colsb, a.colsb = 4 b.rows)");
    const int n_cols = c.colsb / 4, n_pairs = a.colsb / 4;
    for (int m = 0; m < c.rows; ++m) {
        float acc[kMaxColsb / 4];
        for (int n = 0; n < n_cols; ++n) acc[n] = c.f32(m, n);
        for (int k = 0; k < n_pairs; ++k) {
            const float a0 = bf16_daz(a.bf16(m, 2 * k)), a1 = bf16_daz(a.bf16(m, 2 * k + 1));
            for (int n = 0; n < n_cols; ++n) {
                acc[n] = ftz(std::fma(a0, bf16_daz(b.bf16(k, 2 * n)), acc[n]));
                acc[n] = ftz(std::fma(a1, bf16_daz(b.bf16(k, 2 * n + 1)), acc[n]));
            }
        }
        std::memcpy(c.data[m], acc, size_t(n_cols) * 4);
    }
}

}   // namespace kimi::cpu::amx
