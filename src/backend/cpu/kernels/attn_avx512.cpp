// AVX-512 BF16 attention products for the vision tower (this TU alone is compiled with the
// AVX-512 flags; called only after cpu_features() confirmed AVX-512 BF16), as outer-product
// tiles — no horizontal sums, which the matmul kernels pay per output element:
// - scores s = x · kᵀ over a short reduction (a head's width, e.g. 128): 16 keys per vector,
//   each key's (2j, 2j+1) pair of bf16 values as one 32-bit lane, so one vdpbf16ps adds the
//   pair of products of a query row's broadcast pair into 16 scores (4 rows × 64 keys a tile);
// - values o = p · v over the keys: 16 output columns per vector, each column's values of two
//   keys as one lane, the two weights broadcast (3 rows × 8 column vectors a tile).
// Every output is its pairs summed in order: a row's result depends on nothing else.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {

namespace {

constexpr int kRows = 4;      // query rows per scores tile
constexpr int kKeyVecs = 4;   // 16-key vectors per scores tile: 4 × 4 accumulators, 4 key + 4 query registers
constexpr int64_t kKeyBlock = 16 * kKeyVecs;

// Keys [k0, k0 + 64) as pair-interleaved words: out[j · 64 + t] = pair j of key k0 + t (zero past n_keys).
void pack_keys(const uint16_t* k, int64_t n_keys, int64_t pairs, int64_t k0, uint32_t* out) {
    for (int t = 0; t < kKeyBlock; ++t) {
        const int64_t key = k0 + t;
        if (key < n_keys) {
            const auto* row = reinterpret_cast<const uint8_t*>(k + key * pairs * 2);
            for (int64_t j = 0; j < pairs; ++j) std::memcpy(&out[j * kKeyBlock + t], row + 4 * j, 4);
        } else {
            for (int64_t j = 0; j < pairs; ++j) out[j * kKeyBlock + t] = 0;
        }
    }
}

// R query rows × V vectors of 16 keys; mask[v]: the keys of vector v that exist.
template <int R, int V>
void tile(const uint32_t* q, int64_t pairs, const uint32_t* kp, float* s, int64_t lds, const __mmask16* mask) {
    __m512 acc[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
    for (int64_t j = 0; j < pairs; ++j) {
        __m512bh kv[V];
        for (int v = 0; v < V; ++v) kv[v] = (__m512bh)_mm512_loadu_si512(kp + j * kKeyBlock + 16 * v);
        for (int r = 0; r < R; ++r) {
            const __m512bh b = (__m512bh)_mm512_set1_epi32(int32_t(q[r * pairs + j]));
            for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], b, kv[v]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(s + r * lds + 16 * v, mask[v], acc[r][v]);
}

template <int R>
void tile_keys(int vecs, const uint32_t* q, int64_t pairs, const uint32_t* kp, float* s, int64_t lds,
               const __mmask16* mask) {
    switch (vecs) {
        case 4: return tile<R, 4>(q, pairs, kp, s, lds, mask);
        case 3: return tile<R, 3>(q, pairs, kp, s, lds, mask);
        case 2: return tile<R, 2>(q, pairs, kp, s, lds, mask);
        default: return tile<R, 1>(q, pairs, kp, s, lds, mask);
    }
}

void tile_rows(int rows, int vecs, const uint32_t* q, int64_t pairs, const uint32_t* kp, float* s, int64_t lds,
               const __mmask16* mask) {
    switch (rows) {
        case 4: return tile_keys<4>(vecs, q, pairs, kp, s, lds, mask);
        case 3: return tile_keys<3>(vecs, q, pairs, kp, s, lds, mask);
        case 2: return tile_keys<2>(vecs, q, pairs, kp, s, lds, mask);
        default: return tile_keys<1>(vecs, q, pairs, kp, s, lds, mask);
    }
}

}   // namespace

void attention_scores_avx512_bf16(Exec& ex, const float* x, int64_t n_rows, int64_t ldx, const Tensor& k, float* s,
                                  int64_t lds) {
    const int64_t n_keys = k.dim(0), width = k.dim(1), pairs = width / 2;
    // the query rows rounded to bf16 as the matmul rounds activations; two bf16 values a word
    std::vector<uint32_t> q(size_t(n_rows * pairs));
    bf16_round_rows_avx512(x, n_rows, ldx, width, nullptr, reinterpret_cast<uint16_t*>(q.data()));
    const auto* keys = static_cast<const uint16_t*>(k.data);
    const int64_t blocks = (n_keys + kKeyBlock - 1) / kKeyBlock;
    ex.pool->parallel_ranges(blocks, [&](int64_t b0, int64_t b1, int) {
        std::vector<uint32_t> kp(size_t(pairs * kKeyBlock));
        for (int64_t b = b0; b < b1; ++b) {
            pack_keys(keys, n_keys, pairs, b * kKeyBlock, kp.data());
            const int64_t left = n_keys - b * kKeyBlock;
            const int vecs = int(std::min<int64_t>(kKeyVecs, (left + 15) / 16));
            __mmask16 mask[kKeyVecs];
            for (int v = 0; v < kKeyVecs; ++v) {
                const int64_t in_vec = std::max<int64_t>(0, std::min<int64_t>(16, left - 16 * v));
                mask[v] = in_vec >= 16 ? __mmask16(0xffff) : __mmask16((1u << in_vec) - 1);
            }
            for (int64_t r = 0; r < n_rows; r += kRows)
                tile_rows(int(std::min<int64_t>(kRows, n_rows - r)), vecs, q.data() + r * pairs, pairs, kp.data(),
                          s + r * lds + b * kKeyBlock, lds, mask);
        }
    });
}

namespace {

constexpr int kValueRows = 3;   // query rows per values tile (3 × 8 accumulators + 8 value vectors: 32 registers)
// key pairs per pass over the rows: their packed values (512 B a pair at width 128) stay in L2
constexpr int64_t kKeyPairBlock = 256;

// Values [key pair kp] as words: out[kp · width16 + c] = v[2kp][c] | v[2kp+1][c] << 16 (zero past
// the keys and the width), width16 = the width rounded up to 16.
void pack_values(const uint16_t* v, int64_t n_keys, int64_t width, int64_t width16, int64_t kp, uint32_t* out) {
    for (int64_t c = 0; c < width16; ++c) {
        const uint32_t lo = c < width ? v[2 * kp * width + c] : 0;
        const uint32_t hi = c < width && 2 * kp + 1 < n_keys ? v[(2 * kp + 1) * width + c] : 0;
        out[kp * width16 + c] = lo | (hi << 16);
    }
}

// o[r, c0 + 16·j + t] for R rows and C chunks of 16 columns, summed over the key pairs in order.
// over the key pairs [kp0, kp1), continuing from the sums stored in o unless kp0 == 0 (the
// same order as one pass: a stored f32 partial sum is the register's value).
template <int R, int C>
void values_tile(const uint32_t* p, int64_t key_pairs, int64_t kp0, int64_t kp1, const uint32_t* vp, int64_t width16,
                 float* o, int64_t ldo, __mmask16 last_mask) {
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            acc[r][c] = kp0 == 0
                ? _mm512_setzero_ps()
                : _mm512_maskz_loadu_ps(c == C - 1 ? last_mask : __mmask16(0xffff), o + r * ldo + 16 * c);
    for (int64_t kp = kp0; kp < kp1; ++kp) {
        __m512bh vv[C];
        for (int c = 0; c < C; ++c) vv[c] = (__m512bh)_mm512_loadu_si512(vp + kp * width16 + 16 * c);
        for (int r = 0; r < R; ++r) {
            const __m512bh b = (__m512bh)_mm512_set1_epi32(int32_t(p[r * key_pairs + kp]));
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], b, vv[c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            _mm512_mask_storeu_ps(o + r * ldo + 16 * c, c == C - 1 ? last_mask : __mmask16(0xffff), acc[r][c]);
}

template <int R>
void values_rows(const uint32_t* p, int64_t key_pairs, int64_t kp0, int64_t kp1, const uint32_t* vp, int64_t width16,
                 int64_t chunks, float* o, int64_t ldo, __mmask16 last_mask) {
    for (int64_t c0 = 0; c0 < chunks; c0 += 8) {   // up to 8 chunks of 16 columns at a time
        const int64_t n = std::min<int64_t>(8, chunks - c0);
        const __mmask16 m = c0 + n == chunks ? last_mask : __mmask16(0xffff);
        const uint32_t* v = vp + 16 * c0;
        float* out = o + 16 * c0;
        switch (n) {
            case 8: values_tile<R, 8>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
            case 7: values_tile<R, 7>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
            case 6: values_tile<R, 6>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
            case 5: values_tile<R, 5>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
            case 4: values_tile<R, 4>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
            case 3: values_tile<R, 3>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
            case 2: values_tile<R, 2>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
            default: values_tile<R, 1>(p, key_pairs, kp0, kp1, v, width16, out, ldo, m); break;
        }
    }
}

}   // namespace

void attention_values_avx512_bf16(Exec& ex, const float* p, int64_t n_rows, int64_t ldp, const Tensor& v, float* o,
                                  int64_t ldo) {
    const int64_t n_keys = v.dim(0), width = v.dim(1), key_pairs = (n_keys + 1) / 2;
    const int64_t chunks = (width + 15) / 16, width16 = chunks * 16;
    const __mmask16 last_mask = width % 16 == 0 ? __mmask16(0xffff) : __mmask16((1u << (width % 16)) - 1);
    const auto* values = static_cast<const uint16_t*>(v.data);
    std::vector<uint32_t> vp(size_t(key_pairs * width16)), pp(size_t(n_rows * key_pairs));
    ex.pool->parallel_for(key_pairs, [&](int64_t kp) { pack_values(values, n_keys, width, width16, kp, vp.data()); });
    // the weights rounded to bf16 as the matmul rounds activations, two keys a word (an odd key
    // count pads each row with a zero)
    ex.pool->parallel_for(n_rows, [&](int64_t i) {
        auto* row = reinterpret_cast<uint16_t*>(pp.data() + i * key_pairs);
        bf16_round_rows_avx512(p + i * ldp, 1, ldp, n_keys, nullptr, row);
        if (n_keys % 2) row[n_keys] = 0;
    });
    const int64_t groups = (n_rows + kValueRows - 1) / kValueRows;
    for (int64_t kp0 = 0; kp0 < key_pairs; kp0 += kKeyPairBlock) {   // every row over one block of keys
        const int64_t kp1 = std::min(key_pairs, kp0 + kKeyPairBlock);
        ex.pool->parallel_for(groups, [&](int64_t g) {
            const int64_t r0 = g * kValueRows, rows = std::min<int64_t>(kValueRows, n_rows - r0);
            const uint32_t* pr = pp.data() + r0 * key_pairs;
            float* out = o + r0 * ldo;
            if (rows == 3)
                values_rows<3>(pr, key_pairs, kp0, kp1, vp.data(), width16, chunks, out, ldo, last_mask);
            else if (rows == 2)
                values_rows<2>(pr, key_pairs, kp0, kp1, vp.data(), width16, chunks, out, ldo, last_mask);
            else
                values_rows<1>(pr, key_pairs, kp0, kp1, vp.data(), width16, chunks, out, ldo, last_mask);
        });
    }
}

}   // namespace kimi::cpu
