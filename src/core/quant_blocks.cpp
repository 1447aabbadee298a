// Exact decoding of ggml's block-quantized formats (see quant_blocks.h). One function per type
// decodes one block; each mirrors ggml's dequantize_row_* (ggml/src/ggml-quants.c) for a single
// block: the same integer unpacking, and the same f32 operations in the same order (this
// library is compiled with -ffp-contract=off, so a*b + c stays two roundings, as ggml's
// reference and gguf-py's numpy compute it). Multi-byte fields are read little-endian, as
// ggml's structs lie in a GGUF file.
#include "core/quant_blocks.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace kimi {
namespace {

#include "core/quant_grids.inc"

constexpr int kQK = 256;   // QK_K: the values of a k-quant or codebook super-block

uint16_t load_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t load_u32(const uint8_t* p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
float load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

// Byte j of a packed grid entry (ggml reads the uint64_t/uint32_t through a byte pointer on a
// little-endian machine: byte j is bits 8j..8j+7).
uint8_t grid_byte(uint64_t entry, int j) { return uint8_t(entry >> (8 * j)); }

// ggml's `v * (signs & kmask_iq2xs[j] ? -1.f : 1.f)`, done as a sign flip. The same for every
// number; for a NaN (a NaN scale) it flips the NaN's sign where the multiply by -1.f would keep it,
// as ggml's C compiled with optimization does (gcc -O2/-O3 and clang -O3 turn that multiply into
// a negation; gguf-py's numpy multiply and gcc -O0 keep the sign). Written out so that our
// result does not depend on the compiler or the optimization level.
float apply_sign(float v, uint8_t signs, int j) { return ((signs >> j) & 1) ? -v : v; }

// ---- 32-value blocks -------------------------------------------------------------------------

// dequantize_row_q4_0: d (f16), 16 bytes of nibbles: value j low nibble of byte j, j+16 high.
void decode_q4_0(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
        y[j] = float((qs[j] & 0x0F) - 8) * d;
        y[j + 16] = float((qs[j] >> 4) - 8) * d;
    }
}

// dequantize_row_q4_1: d, m (f16), 16 bytes of nibbles; x*d + m.
void decode_q4_1(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < 16; ++j) {
        y[j] = float(qs[j] & 0x0F) * d + m;
        y[j + 16] = float(qs[j] >> 4) * d + m;
    }
}

// dequantize_row_q5_0: d, qh (32 fifth bits, u32), 16 bytes of nibbles; (x - 16)*d.
void decode_q5_0(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint32_t qh = load_u32(b + 2);
    const uint8_t* qs = b + 6;
    for (int j = 0; j < 16; ++j) {
        const int x0 = ((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
        const int x1 = ((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
        y[j] = float(x0) * d;
        y[j + 16] = float(x1) * d;
    }
}

// dequantize_row_q5_1: d, m, qh, nibbles; x*d + m.
void decode_q5_1(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint32_t qh = load_u32(b + 4);
    const uint8_t* qs = b + 8;
    for (int j = 0; j < 16; ++j) {
        const int x0 = (qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
        const int x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
        y[j] = float(x0) * d + m;
        y[j + 16] = float(x1) * d + m;
    }
}

// dequantize_row_q8_0: d, 32 int8 values.
void decode_q8_0(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

// dequantize_row_iq4_nl: d, nibbles indexing kvalues_iq4nl.
void decode_iq4_nl(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
        y[j] = d * float(kvalues_iq4nl[qs[j] & 0x0F]);
        y[j + 16] = d * float(kvalues_iq4nl[qs[j] >> 4]);
    }
}

// ggml_e8m0_to_fp32_half (ggml-impl.h): 2^(e - 128), i.e. half the E8M0 scale; bytes 0 and 1
// are the subnormals 2^-128 and 2^-127, byte 255 is 2^127 (finite, not NaN).
float e8m0_to_f32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// dequantize_row_mxfp4: E8M0 byte, nibbles indexing kvalues_mxfp4 (doubled E2M1 values, hence
// the halved scale).
void decode_mxfp4(const uint8_t* b, float* y) {
    const float d = e8m0_to_f32_half(b[0]);
    const uint8_t* qs = b + 1;
    for (int j = 0; j < 16; ++j) {
        y[j] = float(kvalues_mxfp4[qs[j] & 0x0F]) * d;
        y[j + 16] = float(kvalues_mxfp4[qs[j] >> 4]) * d;
    }
}

// ---- k-quants (256-value super-blocks) -------------------------------------------------------

// dequantize_row_q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2-bit), d, dmin.
void decode_q2_k(const uint8_t* b, float* y) {
    const uint8_t* scales = b;
    const uint8_t* q = b + 16;
    const float d = load_f16(b + 80);
    const float dmin = load_f16(b + 82);
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; ++part) {   // 16 values from q[0..15], then q[16..31]
                const uint8_t sc = scales[is++];
                const float dl = d * float(sc & 0x0F);
                const float ml = dmin * float(sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * part] >> shift) & 3) - ml;
            }
        }
    }
}

// dequantize_row_q3_K: hmask[32], qs[64], scales[12] (sixteen 6-bit scales), d.
void decode_q3_k(const uint8_t* b, float* y) {
    const uint8_t* hm = b;
    const uint8_t* q = b + 32;
    const uint8_t* packed = b + 96;
    const float d_all = load_f16(b + 108);
    // Scale i: low 4 bits from byte i % 8 (low nibble for i < 8, high nibble after), high 2 bits
    // from byte 8 + i % 4, bits 2*(i / 4)..+1. Biased by 32.
    int scales[16];
    for (int i = 0; i < 16; ++i) {
        const int lo = (packed[i % 8] >> (4 * (i / 8))) & 0x0F;
        const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
        scales[i] = (lo | (hi << 4)) - 32;
    }
    int is = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
            for (int part = 0; part < 2; ++part) {
                const float dl = d_all * float(scales[is++]);
                for (int l = 16 * part; l < 16 * part + 16; ++l) {
                    *y++ = dl * float(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

// dequantize_row_q4_K: d, dmin, scales[12], qs[128]; 64 values per 32 bytes (low nibbles, then high).
void decode_q4_k(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
        float d1, m1, d2, m2;
        k_scale_min(is, scales, d, dmin, d1, m1);
        k_scale_min(is + 1, scales, d, dmin, d2, m2);
        for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0x0F) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
}

// dequantize_row_q5_K: d, dmin, scales[12], qh[32] (bit is of byte l: fifth bit of sub-block is), qs[128].
void decode_q5_k(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48;
    for (int is = 0; is < 8; is += 2, ql += 32) {
        float d1, m1, d2, m2;
        k_scale_min(is, scales, d, dmin, d1, m1);
        k_scale_min(is + 1, scales, d, dmin, d2, m2);
        const uint8_t u1 = uint8_t(1 << is), u2 = uint8_t(2 << is);
        for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
}

// dequantize_row_q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], d; d*sc*q.
void decode_q6_k(const uint8_t* b, float* y) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = load_f16(b + 208);
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * float(sc[is]) * float(q1);
            y[l + 32] = d * float(sc[is + 2]) * float(q2);
            y[l + 64] = d * float(sc[is + 4]) * float(q3);
            y[l + 96] = d * float(sc[is + 6]) * float(q4);
        }
    }
}

// dequantize_row_iq4_xs: d, scales_h (u16: 2 high bits per sub-block), scales_l[4] (nibbles),
// qs[128]; 32-value sub-blocks like IQ4_NL with scale d*(ls - 32).
void decode_iq4_xs(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint16_t scales_h = load_u16(b + 2);
    const uint8_t* scales_l = b + 4;
    const uint8_t* qs = b + 8;
    for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
        const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
        const float dl = d * float(ls - 32);
        for (int j = 0; j < 16; ++j) {
            y[j] = dl * float(kvalues_iq4nl[qs[j] & 0x0F]);
            y[j + 16] = dl * float(kvalues_iq4nl[qs[j] >> 4]);
        }
    }
}

// ---- ternary ---------------------------------------------------------------------------------

// One base-3 digit of a TQ1_0 byte, as ggml extracts it: the byte holds ceil(v * 256 / 243) for
// the 5 (or 4) digits v read as a base-3 fraction; multiplying by 3^n (mod 256) shifts digit n
// to the top, and (q * 3) >> 8 reads it. Returns digit - 1, in {-1, 0, 1}.
int tq1_digit(uint8_t byte, int n) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = uint8_t(byte * kPow3[n]);
    return ((q * 3) >> 8) - 1;
}

// dequantize_row_tq1_0: qs[48] (5 digits each: bytes 0..31 give values n*32 + m, bytes 32..47
// values 160 + n*16 + m), qh[4] (4 digits each: values 240 + n*4 + j), d.
void decode_tq1_0(const uint8_t* b, float* y) {
    const uint8_t* qs = b;
    const uint8_t* qh = b + 48;
    const float d = load_f16(b + 52);
    for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 32; ++m) *y++ = float(tq1_digit(qs[m], n)) * d;
    for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 16; ++m) *y++ = float(tq1_digit(qs[32 + m], n)) * d;
    for (int n = 0; n < 4; ++n)
        for (int j = 0; j < 4; ++j) *y++ = float(tq1_digit(qh[j], n)) * d;
}

// dequantize_row_tq2_0: qs[64] (2-bit fields, value 32*(4*c + l) + m in bits 2l of byte 32c + m), d.
void decode_tq2_0(const uint8_t* b, float* y) {
    const float d = load_f16(b + 64);
    for (int c = 0; c < 2; ++c)
        for (int l = 0; l < 4; ++l)
            for (int m = 0; m < 32; ++m) *y++ = float(((b[32 * c + m] >> (2 * l)) & 3) - 1) * d;
}

// ---- codebook types (IQ2, IQ3, IQ1) ----------------------------------------------------------

// 8 values of a uint64_t grid entry, scaled by db and signed: ggml's db * grid[j] * (±1).
void put_grid8(float db, uint64_t entry, uint8_t signs, float* y) {
    for (int j = 0; j < 8; ++j) y[j] = apply_sign(db * float(grid_byte(entry, j)), signs, j);
}

// dequantize_row_iq2_xxs: d, then per 32 values two u32: four grid indices (bytes of the first),
// four 7-bit sign indices into ksigns_iq2xs and a 4-bit scale (the second).
void decode_iq2_xxs(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    for (int ib32 = 0; ib32 < 8; ++ib32) {
        const uint8_t* idx = b + 2 + 8 * ib32;
        const uint32_t aux = load_u32(idx + 4);
        const float db = d * (0.5f + float(aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; ++l, y += 8) put_grid8(db, iq2xxs_grid[idx[l]], ksigns_iq2xs[(aux >> (7 * l)) & 127], y);
    }
}

// dequantize_row_iq2_xs: d, qs[32] (u16: 9-bit grid index, 7-bit sign index), scales[8] (two
// 4-bit scales per 32 values, one per 16).
void decode_iq2_xs(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* scales = b + 66;
    for (int ib32 = 0; ib32 < 8; ++ib32) {
        const float db[2] = {d * (0.5f + float(scales[ib32] & 0x0F)) * 0.25f,
                             d * (0.5f + float(scales[ib32] >> 4)) * 0.25f};
        for (int l = 0; l < 4; ++l, y += 8) {
            const uint16_t q = load_u16(qs + 2 * (4 * ib32 + l));
            put_grid8(db[l / 2], iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9], y);
        }
    }
}

// dequantize_row_iq2_s: d, qs[32] (grid index low bytes), signs[32] (plain sign bytes), qh[8]
// (2 high index bits per group of 8), scales[8].
void decode_iq2_s(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* signs = b + 34;
    const uint8_t* qh = b + 66;
    const uint8_t* scales = b + 74;
    for (int ib32 = 0; ib32 < 8; ++ib32, qs += 4, signs += 4) {
        const float db[2] = {d * (0.5f + float(scales[ib32] & 0x0F)) * 0.25f,
                             d * (0.5f + float(scales[ib32] >> 4)) * 0.25f};
        for (int l = 0; l < 4; ++l, y += 8) {
            const int index = qs[l] | ((qh[ib32] << (8 - 2 * l)) & 0x300);
            put_grid8(db[l / 2], iq2s_grid[index], signs[l], y);
        }
    }
}

// 8 values from two uint32_t grid entries (4 each) with one sign byte: the IQ3 types.
void put_grid4x2(float db, uint32_t entry1, uint32_t entry2, uint8_t signs, float* y) {
    for (int j = 0; j < 4; ++j) {
        y[j] = apply_sign(db * float(grid_byte(entry1, j)), signs, j);
        y[j + 4] = apply_sign(db * float(grid_byte(entry2, j)), signs, j + 4);
    }
}

// dequantize_row_iq3_xxs: d, qs[64] (grid indices), then per 32 values a u32 of four 7-bit sign
// indices and a 4-bit scale.
void decode_iq3_xxs(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* scales_and_signs = b + 66;
    for (int ib32 = 0; ib32 < 8; ++ib32, qs += 8) {
        const uint32_t aux = load_u32(scales_and_signs + 4 * ib32);
        const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; ++l, y += 8) {
            put_grid4x2(db, iq3xxs_grid[qs[2 * l]], iq3xxs_grid[qs[2 * l + 1]], ksigns_iq2xs[(aux >> (7 * l)) & 127],
                        y);
        }
    }
}

// dequantize_row_iq3_s: d, qs[64] (grid index low bytes), qh[8] (9th index bit, one byte per 32
// values), signs[32], scales[4] (one 4-bit scale per 32 values: d * (1 + 2*s)).
void decode_iq3_s(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* qh = b + 66;
    const uint8_t* signs = b + 74;
    const uint8_t* scales = b + 106;
    for (int ib32 = 0; ib32 < 8; ++ib32, qs += 8, signs += 4) {
        const float db = d * float(1 + 2 * ((scales[ib32 / 2] >> (4 * (ib32 % 2))) & 0x0F));
        for (int l = 0; l < 4; ++l, y += 8) {
            const int i1 = qs[2 * l] | ((qh[ib32] << (8 - 2 * l)) & 256);
            const int i2 = qs[2 * l + 1] | ((qh[ib32] << (7 - 2 * l)) & 256);
            put_grid4x2(db, iq3s_grid[i1], iq3s_grid[i2], signs[l], y);
        }
    }
}

// 8 values of an iq1s_grid entry (int8 bytes in {-1, 0, 1}): ggml's dl * (grid[j] + delta).
void put_grid_iq1(float dl, float delta, uint64_t entry, float* y) {
    for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(grid_byte(entry, j))) + delta);
}

// dequantize_row_iq1_s: d, qs[32] (grid index low bytes), qh[8] (u16 per 32 values: 3 high index
// bits per group of 8, a 3-bit scale in bits 12..14, the delta's sign in bit 15).
void decode_iq1_s(const uint8_t* b, float* y) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    for (int ib = 0; ib < 8; ++ib, qs += 4) {
        const uint16_t qh = load_u16(b + 34 + 2 * ib);
        const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
        const float delta = (qh & 0x8000) ? -kIq1sDelta : kIq1sDelta;
        for (int l = 0; l < 4; ++l, y += 8) put_grid_iq1(dl, delta, iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)], y);
    }
}

// dequantize_row_iq1_m: qs[32], qh[16] (per group of 8: 3 high index bits and a delta sign bit,
// two groups per byte), scales[8] (four u16: 3-bit scales, 6 bits per 32 values; their top
// nibbles together are the f16 d). ggml uses IQ1S_DELTA here as well.
void decode_iq1_m(const uint8_t* b, float* y) {
    const uint8_t* qs = b;
    const uint8_t* qh = b + 32;
    uint16_t sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = load_u16(b + 48 + 2 * i);
    const uint16_t d_bits =
        uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    const float d = f16_to_f32(d_bits);
    for (int ib = 0; ib < 8; ++ib, qs += 4, qh += 2) {
        const float dl1 = d * float(2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
        const float dl2 = d * float(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
        for (int l = 0; l < 4; ++l, y += 8) {
            const uint8_t h = uint8_t(qh[l / 2] >> (4 * (l % 2)));   // this group's nibble
            const int index = qs[l] | ((h & 7) << 8);
            const float delta = (h & 0x08) ? -kIq1sDelta : kIq1sDelta;
            put_grid_iq1(l < 2 ? dl1 : dl2, delta, iq1s_grid[index], y);
        }
    }
}

using BlockDecoder = void (*)(const uint8_t*, float*);

BlockDecoder block_decoder(DType t) {
    switch (t) {
        case DType::kQ4_0: return decode_q4_0;
        case DType::kQ4_1: return decode_q4_1;
        case DType::kQ5_0: return decode_q5_0;
        case DType::kQ5_1: return decode_q5_1;
        case DType::kQ8_0: return decode_q8_0;
        case DType::kQ2_K: return decode_q2_k;
        case DType::kQ3_K: return decode_q3_k;
        case DType::kQ4_K: return decode_q4_k;
        case DType::kQ5_K: return decode_q5_k;
        case DType::kQ6_K: return decode_q6_k;
        case DType::kIQ4_NL: return decode_iq4_nl;
        case DType::kIQ4_XS: return decode_iq4_xs;
        case DType::kMXFP4_GGML: return decode_mxfp4;
        case DType::kIQ2_XXS: return decode_iq2_xxs;
        case DType::kIQ2_XS: return decode_iq2_xs;
        case DType::kIQ2_S: return decode_iq2_s;
        case DType::kIQ3_XXS: return decode_iq3_xxs;
        case DType::kIQ3_S: return decode_iq3_s;
        case DType::kIQ1_S: return decode_iq1_s;
        case DType::kIQ1_M: return decode_iq1_m;
        case DType::kTQ1_0: return decode_tq1_0;
        case DType::kTQ2_0: return decode_tq2_0;
        default: throw Error(std::string("dequantize: ") + dtype_name(t) + " is not a GGUF block type");
    }
}

}   // namespace

void dequantize_blocks(DType t, const void* src, float* dst, int64_t n) {
    const BlockDecoder decode = block_decoder(t);
    const BlockShape block = dtype_block(t);
    if (n < 0 || n % block.elems != 0) {
        throw Error("dequantize: " + std::to_string(n) + " values of " + dtype_name(t) + " is not a whole number of " +
                    std::to_string(block.elems) + "-value blocks");
    }
    const uint8_t* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0, nb = n / block.elems; i < nb; ++i) decode(p + i * block.bytes, dst + i * block.elems);
}

float block_element(DType t, const void* data, int64_t row_elems, int64_t e) {
    const BlockDecoder decode = block_decoder(t);
    const BlockShape block = dtype_block(t);
    if (row_elems <= 0 || row_elems % block.elems != 0) {
        throw Error("block_element: a row of " + std::to_string(row_elems) + " values of " + dtype_name(t) +
                    " is not a whole number of " + std::to_string(block.elems) + "-value blocks");
    }
    if (e < 0) throw Error("block_element: negative element index " + std::to_string(e));
    const int64_t row = e / row_elems, col = e % row_elems;
    const int64_t row_bytes = row_elems / block.elems * block.bytes;
    const uint8_t* blk = static_cast<const uint8_t*>(data) + row * row_bytes + col / block.elems * block.bytes;
    float values[kQK];
    decode(blk, values);
    return values[col % block.elems];
}

const int8_t (&kvalues_iq4nl_table())[16] { return kvalues_iq4nl; }
const int8_t (&kvalues_mxfp4_table())[16] { return kvalues_mxfp4; }
float e8m0_half(uint8_t e) { return e8m0_to_f32_half(e); }

}   // namespace kimi
