// AVX-512 kernels of the common GGUF block types (docs/gguf.md#types):
// - exact decoding, 16 values per instruction: the same values as core/quant_blocks.cpp (each
//   value the same f32 operations on the same operands as ggml's dequantize_row_*), for the
//   decoded path (f32 activations); checked bit for bit against the portable decoder;
// - the factored bf16 product (bf16 activations, AVX-512 BF16): codes × activations through
//   vdpbf16ps, each sub-block's scale and min applied to its partial sums.
// The other types use the portable decoder. Tests: tests/ops/block_quant_test.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "backend/cpu/kernels/avx512_util.h"
#include "backend/cpu/kernels/block_panels_avx512.h"
#include "backend/cpu/kernels/kquant_avx512.h"

#include "backend/cpu/matmul_kernel.h"
#include "core/quant_blocks.h"

namespace kimi::cpu {

namespace {

float f16_at(const uint8_t* p) { return f16_bits_to_f32(uint16_t(p[0] | (p[1] << 8))); }

__m512i bytes16(const uint8_t* p) {   // 16 bytes → 16 int32 lanes
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__m512i lo4(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi32(0x0F)); }
__m512i hi4(__m512i v) { return _mm512_srli_epi32(v, 4); }
__m512 to_f(__m512i v) { return _mm512_cvtepi32_ps(v); }
void put(float* y, __m512 v) { _mm512_storeu_ps(y, v); }
// Two 256-bit halves into one register.
__m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

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

// ---- bf16 activations × Q2_K, Q3_K, Q5_K, Q8_0, Q4_0, Q5_0, IQ4_NL/XS, MXFP4: the factored product
// (Q4_K and Q6_K: quant_lanes_avx512.cpp, in a sub-block lane order).
// Every weight is s·c − m with an integer code c (|c| ≤ 127: exact in bf16), and s, m the f32
// scale and min of its sub-block (16 or 32 values). So a 32-column chunk k of a row is
//   p_k = vdpbf16ps(0, c_k, x_k)   (16 lanes: exact products, each pair summed in f32)
//   acc = fma(p_k, S_k, acc)       (S_k: the sub-block scale of each lane)
//   acc = fma(px_k, −m_k, acc)     (Q5_K only; px_k = vdpbf16ps(0, ones, x_k))
// over the chunks in ascending order, then hsum16(acc). Every (row, token) pair has its own
// accumulator and the same steps, so a row's result never depends on the batch, the tile or
// the thread. The weights are the file's values exactly; only the sums are ordered
// differently from the f32 path (bf16 activations are rounded already).

// The bf16 bits of a small integer (|v| < 256: exact), at compile time.
constexpr uint16_t bf16_int(int v) {
    if (v == 0) return 0;
    const uint16_t sign = v < 0 ? 0x8000 : 0;
    int a = v < 0 ? -v : v, e = 0;
    while ((a >> e) > 1) ++e;                 // a = 1.m · 2^e
    const int man = ((a << 7) >> e) & 0x7F;   // the 7 bits after the leading one
    return uint16_t(sign | ((127 + e) << 7) | man);
}
struct Bf16Ints {   // the lookup tables of the codes: bf16(lo + i), i < 64
    alignas(64) uint16_t v[64];
    constexpr explicit Bf16Ints(int lo) : v{} {
        for (int i = 0; i < 64; ++i) v[i] = bf16_int(lo + i);
    }
};
constexpr Bf16Ints kCodes0(0), kCodesM4(-4);
__m512i table_half(const Bf16Ints& t, int half) { return _mm512_load_si512(t.v + 32 * half); }

// Q5_K: 8 sub-blocks of 32 with a scale and a min each (k_scales16).
struct KScalesMins {
    static constexpr bool kMin = true;
    float sm[16];   // the 8 sub-block scales, then the 8 mins negated
    __m512 scale(int k) const { return _mm512_set1_ps(sm[k]); }
    __m512 min(int k) const { return _mm512_set1_ps(sm[8 + k]); }
};

struct Q8_0Bf16 {
    static constexpr int64_t kElems = 32, kBytes = 34;
    static constexpr bool kMin = false;
    __m512i codes[1];
    float d;
    void prepare(const uint8_t* b) {
        d = f16_value(b);
        const auto half = [&](int c) {
            return _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * c))));
        };
        codes[0] = (__m512i)_mm512_cvtne2ps_pbh(half(1), half(0));   // exact: |c| ≤ 128
    }
    __m512 scale(int) const { return _mm512_set1_ps(d); }
    __m512 min(int) const { return _mm512_setzero_ps(); }
};

// NR weight rows × NT token rows over the whole reduction.
struct Q5_KBf16 : KScalesMins {
    static constexpr int64_t kElems = 256, kBytes = 176;
    __m512i codes[8];
    void prepare(const uint8_t* b) {
        _mm512_storeu_ps(sm, k_scales16(b + 4, f16_value(b), f16_value(b + 2)));
        const __m512i table = table_half(kCodes0, 0), one = _mm512_set1_epi16(1);
        const __m512i h = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
        for (int g = 0; g < 4; ++g) {   // sub-blocks 2g (low nibbles) and 2g + 1 (high), fifth bit from qh
            const __m512i w =
                _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 48 + 32 * g)));
            const auto fifth = [&](int bit) {
                return _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, bit), one), 4);
            };
            codes[2 * g] = _mm512_permutexvar_epi16(
                _mm512_or_si512(_mm512_and_si512(w, _mm512_set1_epi16(0x0F)), fifth(2 * g)), table);
            codes[2 * g + 1] =
                _mm512_permutexvar_epi16(_mm512_or_si512(_mm512_srli_epi16(w, 4), fifth(2 * g + 1)), table);
        }
    }
};

// Q2_K: 16-value sub-blocks, each with a 4-bit scale and min; chunk (half h, shift 2j) holds
// sub-blocks 8h + 2j (lanes 0-7) and 8h + 2j + 1 (lanes 8-15): codes (q[l] >> 2j) & 3.
struct Q2_KBf16 {
    static constexpr int64_t kElems = 256, kBytes = 84;
    static constexpr bool kMin = true;
    __m512i codes[8];
    float s[16], m[16];
    void prepare(const uint8_t* b) {
        const float d = f16_value(b + 80), dmin = f16_value(b + 82);
        for (int i = 0; i < 16; ++i) {
            s[i] = d * float(b[i] & 0x0F);
            m[i] = -(dmin * float(b[i] >> 4));
        }
        const __m512i table = table_half(kCodes0, 0), three = _mm512_set1_epi16(3);
        for (int h = 0; h < 2; ++h) {
            const __m512i w =
                _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * h)));
            for (int j = 0; j < 4; ++j)
                codes[4 * h + j] =
                    _mm512_permutexvar_epi16(_mm512_and_si512(_mm512_srli_epi16(w, 2 * j), three), table);
        }
    }
    __m512 scale(int k) const {
        return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(s[2 * k]), _mm512_set1_ps(s[2 * k + 1]));
    }
    __m512 min(int k) const {
        return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(m[2 * k]), _mm512_set1_ps(m[2 * k + 1]));
    }
};

// Q3_K: codes ((q >> 2j) & 3) − 4 where the hmask bit is clear, 16-value sub-blocks with 6-bit
// signed scales; chunk order as Q2_K.
struct Q3_KBf16 {
    static constexpr int64_t kElems = 256, kBytes = 110;
    static constexpr bool kMin = false;
    __m512i codes[8];
    float s[16];
    void prepare(const uint8_t* b) {
        const float d = f16_value(b + 108);
        const uint8_t* packed = b + 96;
        for (int i = 0; i < 16; ++i) {
            const int lo = (packed[i % 8] >> (4 * (i / 8))) & 0x0F, hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
            s[i] = d * float((lo | (hi << 4)) - 32);
        }
        // table index: the 2-bit code, + 4 where the hmask bit is set: bf16(code − 4 + 4·bit)
        const __m512i table = table_half(kCodesM4, 0), three = _mm512_set1_epi16(3), one = _mm512_set1_epi16(1);
        const __m512i hm = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
        for (int h = 0; h < 2; ++h) {
            const __m512i w =
                _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 + 32 * h)));
            for (int j = 0; j < 4; ++j) {
                const __m512i bit = _mm512_and_si512(_mm512_srli_epi16(hm, 4 * h + j), one);
                const __m512i idx =
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(w, 2 * j), three), _mm512_slli_epi16(bit, 2));
                codes[4 * h + j] = _mm512_permutexvar_epi16(idx, table);
            }
        }
    }
    __m512 scale(int k) const {
        return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(s[2 * k]), _mm512_set1_ps(s[2 * k + 1]));
    }
    __m512 min(int) const { return _mm512_setzero_ps(); }
};

// 32 values from 16 bytes of nibbles (value j: low nibble of byte j, value j + 16: its high
// nibble) looked up in a 16-entry table of bf16 codes.
__m512i nibble_codes(const uint8_t* q, __m512i table) {
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    const __m512i idx = join256(_mm256_and_si256(w, _mm256_set1_epi16(0x0F)), _mm256_srli_epi16(w, 4));
    return _mm512_permutexvar_epi16(idx, table);
}
__m512i bf16_table(const int8_t (&v)[16]) {
    alignas(64) uint16_t t[32] = {};
    for (int i = 0; i < 16; ++i) t[i] = bf16_int(v[i]);
    return _mm512_load_si512(t);
}

struct IQ4_XSBf16 {
    static constexpr int64_t kElems = 256, kBytes = 136;
    static constexpr bool kMin = false;
    __m512i codes[8];
    float s[8];
    void prepare(const uint8_t* b) {
        static const __m512i table = bf16_table(kvalues_iq4nl_table());
        const float d = f16_value(b);
        const int sh = b[2] | (b[3] << 8);
        for (int ib = 0; ib < 8; ++ib) {
            const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((sh >> (2 * ib)) & 3) << 4);
            s[ib] = d * float(ls - 32);
            codes[ib] = nibble_codes(b + 8 + 16 * ib, table);
        }
    }
    __m512 scale(int k) const { return _mm512_set1_ps(s[k]); }
    __m512 min(int) const { return _mm512_setzero_ps(); }
};

// The 32-value nibble blocks: IQ4_NL (f16 d, kvalues_iq4nl), MXFP4 (E8M0 byte, kvalues_mxfp4),
// Q4_0 (f16 d, code − 8).
template <DType T>
struct Nib32Bf16 {
    static constexpr int64_t kElems = 32, kBytes = T == DType::kMXFP4_GGML ? 17 : 18;
    static constexpr bool kMin = false;
    __m512i codes[1];
    float d;
    static __m512i table() {
        static const __m512i t = [] {
            if constexpr (T == DType::kIQ4_NL) return bf16_table(kvalues_iq4nl_table());
            if constexpr (T == DType::kMXFP4_GGML) return bf16_table(kvalues_mxfp4_table());
            static constexpr int8_t q4_0[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
            return bf16_table(q4_0);
        }();
        return t;
    }
    void prepare(const uint8_t* b) {
        d = T == DType::kMXFP4_GGML ? e8m0_half(b[0]) : f16_value(b);
        codes[0] = nibble_codes(b + kBytes - 16, table());
    }
    __m512 scale(int) const { return _mm512_set1_ps(d); }
    __m512 min(int) const { return _mm512_setzero_ps(); }
};

// Q5_0: 32 values, code = nibble | fifth bit << 4 (bit j of qh for value j), minus 16; the bit set
// by a masked add of 16 on the word indices, then one 32-entry lookup.
struct Q5_0Bf16 {
    static constexpr int64_t kElems = 32, kBytes = 22;
    static constexpr bool kMin = false;
    __m512i codes[1];
    float d;
    void prepare(const uint8_t* b) {
        static const __m512i table = [] {
            alignas(64) uint16_t t[32];
            for (int i = 0; i < 32; ++i) t[i] = bf16_int(i - 16);
            return _mm512_load_si512(t);
        }();
        d = f16_value(b);
        uint32_t qh;
        std::memcpy(&qh, b + 2, 4);
        const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 6)));
        __m512i idx = join256(_mm256_and_si256(w, _mm256_set1_epi16(0x0F)), _mm256_srli_epi16(w, 4));
        idx = _mm512_mask_add_epi16(idx, __mmask32(qh), idx, _mm512_set1_epi16(16));   // (idx < 16: + is |)
        codes[0] = _mm512_permutexvar_epi16(idx, table);
    }
    __m512 scale(int) const { return _mm512_set1_ps(d); }
    __m512 min(int) const { return _mm512_setzero_ps(); }
};

// Chunk c of one row's prepared block against NT token rows (xv: their activations, px: their
// pair sums for the min): p = vdpbf16ps(0, codes, x), acc += p·S (+ px·(−m)). The same steps
// whether the block was prepared ahead (prefill) or just now (decode).
template <class B, int NT>
inline __attribute__((always_inline)) void bf16_chunk(const B& blk, int c, const __m512i (&xv)[NT],
                                                      const __m512 (&px)[NT], __m512 (&acc)[NT]) {
    const __m512 sv = blk.scale(c);
    for (int t = 0; t < NT; ++t) {
        const __m512 p = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)blk.codes[c], (__m512bh)xv[t]);
        acc[t] = _mm512_fmadd_ps(p, sv, acc[t]);
        if constexpr (B::kMin) acc[t] = _mm512_fmadd_ps(px[t], blk.min(c), acc[t]);
    }
}

// The activations of chunk c of block k for NT token rows, and (kMin) their pair sums.
template <class B, int NT>
inline __attribute__((always_inline)) void bf16_x(const MatmulArgs& a, int64_t t0, int64_t k, int c, __m512i (&xv)[NT],
                                                  __m512 (&px)[NT]) {
    const __m512i ones = (__m512i)_mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
    for (int t = 0; t < NT; ++t) {
        xv[t] = _mm512_loadu_si512(a.xb + (t0 + t) * a.in + k * B::kElems + 32 * c);
        px[t] = B::kMin ? _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)ones, (__m512bh)xv[t]) : _mm512_setzero_ps();
    }
}

// NR weight rows × NT token rows over the whole reduction, the rows' blocks prepared already
// (pre: [NR][blocks]; prefill).
template <class B, int NR, int NT>
void bf16_tile(const MatmulArgs& a, int64_t t0, int64_t o, const B* pre) {
    constexpr int kChunks = int(B::kElems / 32);
    const int64_t nblk = a.in / B::kElems;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nblk; ++k)
        for (int c = 0; c < kChunks; ++c) {
            __m512i xv[NT];
            __m512 px[NT];
            bf16_x<B, NT>(a, t0, k, c, xv, px);
            for (int r = 0; r < NR; ++r) bf16_chunk<B, NT>(pre[r * nblk + k], c, xv, px, acc[r]);
        }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[(t0 + t) * a.ldy + o + r] = hsum16(acc[r][t]);
}

// NR rows × NT (≤ 4) token rows, each block prepared as it streams through and used at once
// (decode), the rows kBlockPrefetchAhead ahead (before o_end) prefetched block by block.
template <class B, int NR, int NT>
void bf16_stream_tile(const MatmulArgs& a, int64_t o, int64_t o_end) {
    constexpr int kChunks = int(B::kElems / 32);
    const int64_t nblk = a.in / B::kElems, row_bytes = nblk * B::kBytes;
    const auto* w = static_cast<const uint8_t*>(a.w) + o * row_bytes;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    const int64_t n_pf = rows_to_prefetch(o, o_end, NR);
    for (int64_t k = 0; k < nblk; ++k) {
        prefetch_rows_ahead<B>(w, row_bytes, k, n_pf);
        for (int r = 0; r < NR; ++r) {
            B blk;
            blk.prepare(w + r * row_bytes + k * B::kBytes);
            for (int c = 0; c < kChunks; ++c) {
                __m512i xv[NT];
                __m512 px[NT];
                bf16_x<B, NT>(a, 0, k, c, xv, px);
                bf16_chunk<B, NT>(blk, c, xv, px, acc[r]);
            }
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[t * a.ldy + o + r] = hsum16(acc[r][t]);
}

template <class B, int NT>
void bf16_streaming(const MatmulArgs& a, int64_t o_begin, int64_t o_end) {
    int64_t o = o_begin;
    for (; o + 4 <= o_end; o += 4) bf16_stream_tile<B, 4, NT>(a, o, o_end);
    for (; o < o_end; ++o) bf16_stream_tile<B, 1, NT>(a, o, o_end);
}

template <class B, int NR>
void bf16_tokens(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t o, const B* pre) {
    int64_t t = t0;
    for (; t + 4 <= t1; t += 4) bf16_tile<B, NR, 4>(a, t, o, pre);
    switch (t1 - t) {
        case 3: return bf16_tile<B, NR, 3>(a, t, o, pre);
        case 2: return bf16_tile<B, NR, 2>(a, t, o, pre);
        case 1: return bf16_tile<B, NR, 1>(a, t, o, pre);
        default: return;
    }
}

// Up to 4 token rows: each block prepared as it streams through. More: panels of
// kMatmulColumnBlock rows, each block of a panel prepared once into scratch; the token rows
// then go through the panel in groups whose activations fit a quarter of L2, so each group is
// read from L2 by all the panel's row tiles.
template <class B>
void bf16_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, void* scratch) {
    switch (a.n_rows) {
        case 1: return bf16_streaming<B, 1>(a, o_begin, o_end);
        case 2: return bf16_streaming<B, 2>(a, o_begin, o_end);
        case 3: return bf16_streaming<B, 3>(a, o_begin, o_end);
        case 4: return bf16_streaming<B, 4>(a, o_begin, o_end);
        default: break;
    }
    prepared_panels(
        a, o_begin, o_end, static_cast<B*>(scratch), 4,
        [&](int64_t t0, int64_t t1, int64_t o, const B* rows) { bf16_tokens<B, 4>(a, t0, t1, o, rows); },
        [&](int64_t t0, int64_t t1, int64_t o, const B* rows) { bf16_tokens<B, 1>(a, t0, t1, o, rows); });
}

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

bool block_bf16_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (!a.xb) return false;
    switch (a.w_dtype) {
        case DType::kQ8_0: bf16_range<Q8_0Bf16>(a, o_begin, o_end, scratch); return true;
        case DType::kQ5_0: bf16_range<Q5_0Bf16>(a, o_begin, o_end, scratch); return true;
        case DType::kQ5_K: bf16_range<Q5_KBf16>(a, o_begin, o_end, scratch); return true;
        case DType::kQ2_K: bf16_range<Q2_KBf16>(a, o_begin, o_end, scratch); return true;
        case DType::kQ3_K: bf16_range<Q3_KBf16>(a, o_begin, o_end, scratch); return true;
        case DType::kIQ4_XS: bf16_range<IQ4_XSBf16>(a, o_begin, o_end, scratch); return true;
        case DType::kIQ4_NL: bf16_range<Nib32Bf16<DType::kIQ4_NL>>(a, o_begin, o_end, scratch); return true;
        case DType::kMXFP4_GGML: bf16_range<Nib32Bf16<DType::kMXFP4_GGML>>(a, o_begin, o_end, scratch); return true;
        case DType::kQ4_0: bf16_range<Nib32Bf16<DType::kQ4_0>>(a, o_begin, o_end, scratch); return true;
        default: return false;
    }
}

bool dequantize_blocks_avx512(DType t, const void* src, float* dst, int64_t n) {
    const Decoder decode = vector_decoder(t);
    if (!decode) return false;
    const BlockShape b = dtype_block(t);
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0, nb = n / b.elems; i < nb; ++i) decode(p + i * b.bytes, dst + i * b.elems);
    return true;
}

}   // namespace kimi::cpu
