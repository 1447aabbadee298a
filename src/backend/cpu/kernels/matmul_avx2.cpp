// AVX2 + FMA + F16C matrix-product kernel (this TU alone is compiled with those flags and is
// only called after cpu_features() confirmed them). Two paths, one reduction order (see
// matmul_kernel.h), so a row's result never depends on which path the batch size picked:
// - few token rows (decode, MoE experts with a handful of tokens): the weights are converted
//   in registers straight from memory, 8 or 4 weight rows at a time, with software prefetch
//   16 rows ahead — this is the bandwidth-bound matrix-vector product;
// - many token rows (prefill, large batches): blocks of weight rows are widened to f32 once
//   into a per-thread scratch and reused by every token row, blocked so the working set
//   stays in L1/L2 (12 independent accumulators per micro-tile, the weights in registers).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {
namespace {

constexpr int64_t kPrefetchRows = 16;   // how far ahead (in weight rows) the direct path prefetches
constexpr int64_t kDirectMaxRows = 4;   // token rows up to which the direct path is used

inline float hsum8(__m256 v) {
    // fixed order: (l0+l4, l1+l5, l2+l6, l3+l7) then (a0+a2, a1+a3) then (b0+b1)
    const __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    const __m128 c = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(c);
}

// 8 weights from element index `e` (flat, a multiple of 8), widened to f32 exactly.
template <DType DT>
inline __m256 load8(const MatmulArgs& a, int64_t e) {
    if constexpr (DT == DType::kF32) {
        return _mm256_loadu_ps(static_cast<const float*>(a.w) + e);
    } else if constexpr (DT == DType::kBF16) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(a.w) + e));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else if constexpr (DT == DType::kF16) {
        return _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(a.w) + e)));
    } else {   // MXFP4: 4 bytes hold the 8 nibbles, element e + k in bits 4k..4k+3
        int32_t word;
        std::memcpy(&word, static_cast<const uint8_t*>(a.w) + e / 2, 4);
        const __m256i nib =
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                             _mm256_set1_epi32(15));
        const __m256 mag =
            _mm256_permutevar8x32_ps(_mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f), nib);
        const __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(nib, 3), 31));
        return _mm256_mul_ps(_mm256_or_ps(mag, sign), _mm256_set1_ps(e8m0_to_f32(a.w_scale[e / kMxfp4Group])));
    }
}

template <DType DT>
inline float load1(const MatmulArgs& a, int64_t e) {
    if constexpr (DT == DType::kF32)
        return static_cast<const float*>(a.w)[e];
    else if constexpr (DT == DType::kBF16)
        return bf16_to_f32(static_cast<const uint16_t*>(a.w)[e]);
    else if constexpr (DT == DType::kF16)
        return f16_to_f32(static_cast<const uint16_t*>(a.w)[e]);
    else
        return mxfp4_element(static_cast<const uint8_t*>(a.w), a.w_scale, e);
}

// Elements per 64-byte line of weights.
template <DType DT>
constexpr int64_t elems_per_line() {
    return DT == DType::kF32 ? 16 : DT == DType::kMXFP4 ? 128 : 32;
}

// Direct path: NR weight rows from o (read from memory) × NT token rows from t.
template <DType DT, int NR, int NT>
inline void direct_tile(const MatmulArgs& a, int64_t t, int64_t o, int64_t o_end) {
    const int64_t in = a.in, in8 = in - in % 8;
    // Rows kPrefetchRows ahead are prefetched only inside this range: past its end lie rows
    // another task reads, or another product's.
    const int64_t n_pf = std::clamp<int64_t>(o_end - o - kPrefetchRows, 0, NR);
    const float* xr[NT];
    for (int j = 0; j < NT; ++j) xr[j] = a.x + (t + j) * a.ldx;
    const int64_t w0 = o * in;   // element offset of row o
    __m256 acc[NT][NR];
    for (int j = 0; j < NT; ++j)
        for (int r = 0; r < NR; ++r) acc[j][r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < in8; i += 8) {
        __m256 xv[NT];
        for (int j = 0; j < NT; ++j) xv[j] = _mm256_loadu_ps(xr[j] + i);
        for (int r = 0; r < NR; ++r) {
            const __m256 wv = load8<DT>(a, w0 + r * in + i);
            for (int j = 0; j < NT; ++j) acc[j][r] = _mm256_fmadd_ps(xv[j], wv, acc[j][r]);
        }
        if (n_pf > 0 && i % elems_per_line<DT>() == 0) {
            const char* base = static_cast<const char*>(a.w) + weight_byte(DT, w0 + kPrefetchRows * in + i);
            for (int r = 0; r < n_pf; ++r) _mm_prefetch(base + weight_byte(DT, r * in), _MM_HINT_T0);
        }
    }
    for (int j = 0; j < NT; ++j) {
        for (int r = 0; r < NR; ++r) {
            float s = hsum8(acc[j][r]);
            for (int64_t i = in8; i < in; ++i) s += xr[j][i] * load1<DT>(a, w0 + r * in + i);
            a.y[(t + j) * a.ldy + o + r] = s;
        }
    }
}

template <DType DT, int NR>
inline void direct_rows(const MatmulArgs& a, int64_t o, int64_t o_end) {
    int64_t t = 0;
    for (; t + 2 <= a.n_rows; t += 2) direct_tile<DT, NR, 2>(a, t, o, o_end);
    if (t < a.n_rows) direct_tile<DT, NR, 1>(a, t, o, o_end);
}

template <DType DT>
void direct_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end) {
    int64_t o = o_begin;
    if (a.n_rows == 1)
        for (; o + 8 <= o_end; o += 8) direct_tile<DT, 8, 1>(a, 0, o, o_end);
    for (; o + 4 <= o_end; o += 4) direct_rows<DT, 4>(a, o, o_end);
    for (; o < o_end; ++o) direct_rows<DT, 1>(a, o, o_end);
}

void widen_row(const MatmulArgs& a, int64_t row, float* out) {
    const int64_t in = a.in, in8 = in - in % 8, base = row * in;
    const char* ahead = static_cast<const char*>(a.w) + weight_byte(a.w_dtype, base + kPrefetchRows * in);
    const int64_t line = a.w_dtype == DType::kMXFP4 ? 128 : 32;   // elements per prefetched line
    auto run = [&](auto dt) {
        constexpr DType DT = decltype(dt)::value;
        int64_t i = 0;
        for (; i < in8; i += 8) {
            if (i % line == 0) _mm_prefetch(ahead + weight_byte(DT, i), _MM_HINT_T0);
            _mm256_storeu_ps(out + i, load8<DT>(a, base + i));
        }
        for (; i < in; ++i) out[i] = load1<DT>(a, base + i);
    };
    switch (a.w_dtype) {
        case DType::kBF16: return run(std::integral_constant<DType, DType::kBF16>{});
        case DType::kF16: return run(std::integral_constant<DType, DType::kF16>{});
        case DType::kMXFP4: return run(std::integral_constant<DType, DType::kMXFP4>{});
        default:
            for (int64_t i = 0; i < in; ++i) out[i] = load1<DType::kF32>(a, base + i);
    }
}

// Widened path, blocked for the caches: a block of row_block(I) weight rows is widened
// once (scratch, L2), then for each block of up to kTokBlock token rows the reduction runs
// in chunks of kChunk elements (x chunk + weight chunk stay in L1), 3 weight rows × 4 token
// rows per micro-tile. The 8-lane partial sums live in `acc` between chunks, so each lane
// still sums its elements in index order: the reduction order of matmul_kernel.h.
constexpr int64_t kTokBlock = 16, kChunk = 256;

struct Block {
    const float* wf;     // widened rows, each `in` floats
    int64_t o, n_w;      // first weight row, rows in the block
    __m256* acc;         // [kTokBlock][n_w] partial sums
    int64_t next_rows;   // rows of the next block to prefetch while this one computes
};

// Prefetches (into L2) elements [c0, c1) of rows [r0, r1) of the next block, so that its
// widening finds them there: the memory reads overlap this block's arithmetic.
inline void prefetch_next(const MatmulArgs& a, const Block& b, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const int64_t step = a.w_dtype == DType::kF32 ? 16 : a.w_dtype == DType::kMXFP4 ? 128 : 32;   // elements per line
    for (int64_t r = r0; r < std::min(r1, b.next_rows); ++r) {
        const char* row = static_cast<const char*>(a.w) + weight_byte(a.w_dtype, (b.o + b.n_w + r) * a.in);
        for (int64_t i = c0; i < c1; i += step) _mm_prefetch(row + weight_byte(a.w_dtype, i), _MM_HINT_T1);
    }
}

template <int NR, int NT>
inline void tile_chunk(const MatmulArgs& a, const Block& b, int64_t t0, int64_t t, int64_t r0, int64_t c0, int64_t c1) {
    const int64_t in = a.in;
    const float* xr[NT];
    __m256 acc[NT][NR];
    for (int j = 0; j < NT; ++j) {
        xr[j] = a.x + (t + j) * a.ldx;
        for (int r = 0; r < NR; ++r) acc[j][r] = c0 == 0 ? _mm256_setzero_ps() : b.acc[(t - t0 + j) * b.n_w + r0 + r];
    }
    const float* wf = b.wf + r0 * in;
    for (int64_t i = c0; i < c1; i += 8) {
        __m256 wv[NR];
        for (int r = 0; r < NR; ++r) wv[r] = _mm256_loadu_ps(wf + r * in + i);
        for (int j = 0; j < NT; ++j) {
            const __m256 xv = _mm256_loadu_ps(xr[j] + i);
            for (int r = 0; r < NR; ++r) acc[j][r] = _mm256_fmadd_ps(xv, wv[r], acc[j][r]);
        }
    }
    for (int j = 0; j < NT; ++j)
        for (int r = 0; r < NR; ++r) b.acc[(t - t0 + j) * b.n_w + r0 + r] = acc[j][r];
}

template <int NR>
inline void rows_chunk(const MatmulArgs& a, const Block& b, int64_t t0, int64_t t1, int64_t r0, int64_t c0,
                       int64_t c1) {
    int64_t t = t0;
    for (; t + 4 <= t1; t += 4) tile_chunk<NR, 4>(a, b, t0, t, r0, c0, c1);
    switch (t1 - t) {
        case 3: return tile_chunk<NR, 3>(a, b, t0, t, r0, c0, c1);
        case 2: return tile_chunk<NR, 2>(a, b, t0, t, r0, c0, c1);
        case 1: return tile_chunk<NR, 1>(a, b, t0, t, r0, c0, c1);
        default: return;
    }
}

void block_tokens(const MatmulArgs& a, const Block& b, int64_t t0, int64_t t1) {
    const int64_t in = a.in, in8 = in - in % 8;
    for (int64_t c0 = 0; c0 < in8; c0 += kChunk) {
        const int64_t c1 = std::min(in8, c0 + kChunk);
        const bool first_tokens = t0 == 0;
        int64_t r = 0;
        for (; r + 3 <= b.n_w; r += 3) {
            if (first_tokens) prefetch_next(a, b, r, r + 3, c0, c1);
            rows_chunk<3>(a, b, t0, t1, r, c0, c1);
        }
        for (; r < b.n_w; ++r) {
            if (first_tokens) prefetch_next(a, b, r, r + 1, c0, c1);
            rows_chunk<1>(a, b, t0, t1, r, c0, c1);
        }
    }
    for (int64_t t = t0; t < t1; ++t) {
        const float* x = a.x + t * a.ldx;
        for (int64_t r = 0; r < b.n_w; ++r) {
            float s = in8 > 0 ? hsum8(b.acc[(t - t0) * b.n_w + r]) : 0.0f;
            for (int64_t i = in8; i < in; ++i) s += x[i] * b.wf[r * in + i];
            a.y[t * a.ldy + b.o + r] = s;
        }
    }
}

// Weight rows widened together: as many as keep the block within about 192 KiB (L2).
int64_t row_block(int64_t in) {
    return std::clamp<int64_t>((49152 / std::max<int64_t>(in, 1)) / 3 * 3, 3, kMaxRowBlock);
}

void widened_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    const int64_t rb = row_block(a.in);
    __m256* acc = reinterpret_cast<__m256*>(scratch);   // scratch is 64-byte aligned
    float* wf = scratch + kTokBlock * kMaxRowBlock * 16;
    for (int64_t o = o_begin; o < o_end; o += rb) {
        const int64_t n_w = std::min(rb, o_end - o);
        const Block b{wf, o, n_w, acc, std::min(rb, o_end - o - n_w)};
        for (int64_t r = 0; r < b.n_w; ++r) widen_row(a, o + r, wf + r * a.in);
        for (int64_t t = 0; t < a.n_rows; t += kTokBlock) block_tokens(a, b, t, std::min(a.n_rows, t + kTokBlock));
    }
}

}   // namespace

void matmul_range_avx2(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.n_rows > kDirectMaxRows) return widened_range(a, o_begin, o_end, scratch);
    switch (a.w_dtype) {
        case DType::kBF16: return direct_range<DType::kBF16>(a, o_begin, o_end);
        case DType::kF16: return direct_range<DType::kF16>(a, o_begin, o_end);
        case DType::kMXFP4: return direct_range<DType::kMXFP4>(a, o_begin, o_end);
        default: return direct_range<DType::kF32>(a, o_begin, o_end);
    }
}

}   // namespace kimi::cpu
