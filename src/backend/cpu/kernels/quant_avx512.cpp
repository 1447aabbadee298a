// Exact decoding of the common GGUF block types, 16 values per AVX-512 instruction: the same
// values as core/quant_blocks.cpp gives (each value the same f32 operations on the same
// operands: the f16 scales widened by f16_to_f32, the codes converted exactly, then the
// multiply and subtract of ggml's dequantize_row_*). The types a Q4_K_M, Q5_K_M, Q8_0,
// IQ4_XS or MXFP4 community file is made of; the others return false (the portable decoder).
// Checked against the portable decoder bit for bit: tests/ops/block_quant_test.cpp.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/matmul_kernel.h"
#include "core/quant_blocks.h"

namespace kimi::cpu {

namespace {

float f16_at(const uint8_t* p) { return f16_to_f32(uint16_t(p[0] | (p[1] << 8))); }

__m512i bytes16(const uint8_t* p) {   // 16 bytes → 16 int32 lanes
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__m512i lo4(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi32(0x0F)); }
__m512i hi4(__m512i v) { return _mm512_srli_epi32(v, 4); }
__m512 to_f(__m512i v) { return _mm512_cvtepi32_ps(v); }
void put(float* y, __m512 v) { _mm512_storeu_ps(y, v); }

// float(q) * d (the order of the portable code; a product is the same either way round)
__m512 mul(__m512i q, float d) { return _mm512_mul_ps(to_f(q), _mm512_set1_ps(d)); }
// d1 * float(q) - m1
__m512 mul_sub(__m512i q, float d1, float m1) {
    return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(d1), to_f(q)), _mm512_set1_ps(m1));
}
// float(q) * d + m
__m512 mul_add(__m512i q, float d, float m) {
    return _mm512_add_ps(_mm512_mul_ps(to_f(q), _mm512_set1_ps(d)), _mm512_set1_ps(m));
}
// A 16-entry int8 codebook indexed by the nibbles in v, as int32.
__m512i lookup16(const int8_t (&table)[16], __m512i v) {
    alignas(64) int32_t t[16];
    for (int i = 0; i < 16; ++i) t[i] = table[i];
    return _mm512_permutexvar_epi32(v, _mm512_load_si512(t));
}

void q8_0(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    for (int c = 0; c < 2; ++c)
        put(y + 16 * c,
            mul(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * c))), d));
}

void q4_0(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    const __m512i q = bytes16(b + 2), eight = _mm512_set1_epi32(8);
    put(y, mul(_mm512_sub_epi32(lo4(q), eight), d));
    put(y + 16, mul(_mm512_sub_epi32(hi4(q), eight), d));
}

void q4_1(const uint8_t* b, float* y) {
    const float d = f16_at(b), m = f16_at(b + 2);
    const __m512i q = bytes16(b + 4);
    put(y, mul_add(lo4(q), d, m));
    put(y + 16, mul_add(hi4(q), d, m));
}

// The fifth bits: bit j of qh for value j (lanes of the low half), bit j + 16 for value j + 16.
__m512i with_fifth(__m512i q, uint32_t bits16) {
    return _mm512_mask_or_epi32(q, __mmask16(bits16), q, _mm512_set1_epi32(0x10));
}

void q5_0(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    uint32_t qh;
    std::memcpy(&qh, b + 2, 4);
    const __m512i q = bytes16(b + 6), sixteen = _mm512_set1_epi32(16);
    put(y, mul(_mm512_sub_epi32(with_fifth(lo4(q), qh & 0xFFFF), sixteen), d));
    put(y + 16, mul(_mm512_sub_epi32(with_fifth(hi4(q), qh >> 16), sixteen), d));
}

void q5_1(const uint8_t* b, float* y) {
    const float d = f16_at(b), m = f16_at(b + 2);
    uint32_t qh;
    std::memcpy(&qh, b + 4, 4);
    const __m512i q = bytes16(b + 8);
    put(y, mul_add(with_fifth(lo4(q), qh & 0xFFFF), d, m));
    put(y + 16, mul_add(with_fifth(hi4(q), qh >> 16), d, m));
}

void iq4_nl(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    const __m512i q = bytes16(b + 2);
    put(y, _mm512_mul_ps(_mm512_set1_ps(d), to_f(lookup16(kvalues_iq4nl_table(), lo4(q)))));
    put(y + 16, _mm512_mul_ps(_mm512_set1_ps(d), to_f(lookup16(kvalues_iq4nl_table(), hi4(q)))));
}

void mxfp4(const uint8_t* b, float* y) {
    const float d = e8m0_half(b[0]);
    const __m512i q = bytes16(b + 1);
    put(y, mul(lookup16(kvalues_mxfp4_table(), lo4(q)), d));
    put(y + 16, mul(lookup16(kvalues_mxfp4_table(), hi4(q)), d));
}

void q4_k(const uint8_t* b, float* y) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t* q = b + 16;
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
        float d1, m1, d2, m2;
        k_scale_min(is, b + 4, d, dmin, d1, m1);
        k_scale_min(is + 1, b + 4, d, dmin, d2, m2);
        const __m512i a = bytes16(q), c = bytes16(q + 16);
        put(y, mul_sub(lo4(a), d1, m1));
        put(y + 16, mul_sub(lo4(c), d1, m1));
        put(y + 32, mul_sub(hi4(a), d2, m2));
        put(y + 48, mul_sub(hi4(c), d2, m2));
    }
}

void q5_k(const uint8_t* b, float* y) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48;
    const __m512i h0 = bytes16(qh), h1 = bytes16(qh + 16), sixteen = _mm512_set1_epi32(16);
    for (int is = 0; is < 8; is += 2, ql += 32, y += 64) {
        float d1, m1, d2, m2;
        k_scale_min(is, b + 4, d, dmin, d1, m1);
        k_scale_min(is + 1, b + 4, d, dmin, d2, m2);
        const __m512i u1 = _mm512_set1_epi32(1 << is), u2 = _mm512_set1_epi32(2 << is);
        const __m512i a = bytes16(ql), c = bytes16(ql + 16);
        const auto fifth = [&](__m512i q, __m512i h, __m512i u) {
            return _mm512_mask_add_epi32(q, _mm512_test_epi32_mask(h, u), q, sixteen);
        };
        put(y, mul_sub(fifth(lo4(a), h0, u1), d1, m1));
        put(y + 16, mul_sub(fifth(lo4(c), h1, u1), d1, m1));
        put(y + 32, mul_sub(fifth(hi4(a), h0, u2), d2, m2));
        put(y + 48, mul_sub(fifth(hi4(c), h1, u2), d2, m2));
    }
}

void q6_k(const uint8_t* b, float* y) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = f16_at(b + 208);
    const __m512i three = _mm512_set1_epi32(3), k32 = _mm512_set1_epi32(32);
    const auto q6 = [&](__m512i low4, __m512i h, int shift) {
        return _mm512_sub_epi32(
            _mm512_or_si512(low4, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, shift), three), 4)), k32);
    };
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8)
        for (int c = 0; c < 2; ++c) {   // l = 16c .. 16c + 15, sub-block scale index c
            const __m512i a = bytes16(ql + 16 * c), e = bytes16(ql + 32 + 16 * c), h = bytes16(qh + 16 * c);
            // d * float(sc) * float(q): (d · sc) first, as the portable code
            put(y + 16 * c, mul(q6(lo4(a), h, 0), d * float(sc[c])));
            put(y + 32 + 16 * c, mul(q6(lo4(e), h, 2), d * float(sc[c + 2])));
            put(y + 64 + 16 * c, mul(q6(hi4(a), h, 4), d * float(sc[c + 4])));
            put(y + 96 + 16 * c, mul(q6(hi4(e), h, 6), d * float(sc[c + 6])));
        }
}

void iq4_xs(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    const uint16_t scales_h = uint16_t(b[2] | (b[3] << 8));
    const uint8_t* scales_l = b + 4;
    const uint8_t* qs = b + 8;
    for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
        const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
        const __m512 dl = _mm512_set1_ps(d * float(ls - 32));
        const __m512i q = bytes16(qs);
        put(y, _mm512_mul_ps(dl, to_f(lookup16(kvalues_iq4nl_table(), lo4(q)))));
        put(y + 16, _mm512_mul_ps(dl, to_f(lookup16(kvalues_iq4nl_table(), hi4(q)))));
    }
}

using Decoder = void (*)(const uint8_t*, float*);

Decoder vector_decoder(DType t) {
    switch (t) {
        case DType::kQ8_0: return q8_0;
        case DType::kQ4_0: return q4_0;
        case DType::kQ4_1: return q4_1;
        case DType::kQ5_0: return q5_0;
        case DType::kQ5_1: return q5_1;
        case DType::kIQ4_NL: return iq4_nl;
        case DType::kMXFP4_GGML: return mxfp4;
        case DType::kQ4_K: return q4_k;
        case DType::kQ5_K: return q5_k;
        case DType::kQ6_K: return q6_k;
        case DType::kIQ4_XS: return iq4_xs;
        default: return nullptr;
    }
}

}   // namespace

bool dequantize_blocks_avx512(DType t, const void* src, float* dst, int64_t n) {
    const Decoder decode = vector_decoder(t);
    if (!decode) return false;
    const BlockShape b = dtype_block(t);
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0, nb = n / b.elems; i < nb; ++i) decode(p + i * b.bytes, dst + i * b.elems);
    return true;
}

}   // namespace kimi::cpu
