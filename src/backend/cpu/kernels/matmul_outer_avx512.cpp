// The lane-order AVX-512 BF16 matrix product: bf16 activations × bf16 weights on CPUs with
// AVX-512 BF16 (this TU alone is compiled with -mavx512bf16 and friends). The order, per output
// element (matmul_kernel.h "The lane order"): 8 chains over the 16-element steps, chain c taking
// pair c of each step in one vdpbf16ps lane, then a fixed tree over the 8, then the tail. Each
// vector holds 8 chains of two (token, row) outputs, so the same chains come out of two shapes:
// - panel (many token rows): a vector is two tokens' step (the activation panel), the weight
//   row's step broadcast to both halves; 8 weight rows × 3 token pairs of accumulators, the
//   reduction in chunks whose activations stay in L1, the chains parked in f32 between chunks;
// - direct (a few token rows, decode): a vector is one step of two weight rows (one shuffle of
//   the two rows as stored), the token's step broadcast.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernel.h"

namespace kimi::cpu {
namespace {

constexpr int64_t kStep = 16;   // elements per step: 8 pairs, one per chain

inline __m512 madd(__m512 acc, __m512i a, __m512i b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }

// 16 elements of a bf16 row (one step) in both 256-bit halves.
inline __m512i step_both(const uint16_t* p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The end of one output: its 8 chains c[0..7] by the fixed tree, then the tail elements
// i ≥ 16·⌊I/16⌋ of the token row x and weight row w in order (exact products, each sum rounded).
inline float finish_output(const float* c, const uint16_t* x, const uint16_t* w, int64_t in) {
    float y = ((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7]));
    for (int64_t i = in - in % kStep; i < in; ++i) y += bf16_to_f32(x[i]) * bf16_to_f32(w[i]);
    return y;
}

// ---- direct: NT token rows (xb, I apart) × NP pairs of weight rows from o ------------------

template <int NT, int NP>
void direct_block(const MatmulArgs& a, int64_t o, int64_t o_end) {
    const int64_t in = a.in, n_steps = in / kStep;
    const auto* w = static_cast<const uint16_t*>(a.w);
    const int64_t n_rows = std::min<int64_t>(2 * NP, o_end - o);
    // the next block's rows (as many as it has) prefetched into L2 alongside, line for line
    const int64_t n_pf = std::clamp<int64_t>(o_end - o - 2 * NP, 0, 2 * NP);
    __m512 acc[NT][NP];
    for (int t = 0; t < NT; ++t)
        for (int p = 0; p < NP; ++p) acc[t][p] = _mm512_setzero_ps();
    for (int64_t s = 0; s < n_steps; s += 2) {   // two steps (one 64-byte line of a row) at a time
        const bool two = s + 1 < n_steps;
        const __mmask32 m = two ? ~__mmask32(0) : __mmask32(0xffff);
        __m512i xs[NT][2];
        for (int t = 0; t < NT; ++t) {
            xs[t][0] = step_both(a.xb + t * in + kStep * s);
            xs[t][1] = two ? step_both(a.xb + t * in + kStep * (s + 1)) : _mm512_setzero_si512();
        }
        for (int p = 0; p < NP; ++p) {
            const int64_t ra = 2 * p, rb = 2 * p + 1;
            const __m512i va =
                ra < n_rows ? _mm512_maskz_loadu_epi16(m, w + (o + ra) * in + kStep * s) : _mm512_setzero_si512();
            const __m512i vb =
                rb < n_rows ? _mm512_maskz_loadu_epi16(m, w + (o + rb) * in + kStep * s) : _mm512_setzero_si512();
            const __m512i lo = _mm512_shuffle_i64x2(va, vb, 0x44), hi = _mm512_shuffle_i64x2(va, vb, 0xee);
            for (int t = 0; t < NT; ++t) acc[t][p] = madd(acc[t][p], lo, xs[t][0]);
            if (two)
                for (int t = 0; t < NT; ++t) acc[t][p] = madd(acc[t][p], hi, xs[t][1]);
        }
        for (int64_t i = 0; i < n_pf; ++i)
            _mm_prefetch(reinterpret_cast<const char*>(w + (o + 2 * NP + i) * in + kStep * s), _MM_HINT_T1);
    }
    for (int t = 0; t < NT; ++t)
        for (int p = 0; p < NP; ++p) {
            alignas(64) float c[16];
            _mm512_store_ps(c, acc[t][p]);
            for (int h = 0; h < 2; ++h)
                if (2 * p + h < n_rows)
                    a.y[t * a.ldy + o + 2 * p + h] =
                        finish_output(c + 8 * h, a.xb + t * in, w + (o + 2 * p + h) * in, in);
        }
}

template <int NT>
void direct_rows(const MatmulArgs& a, int64_t o_begin, int64_t o_end) {
    constexpr int NP = NT <= 2 ? 8 : 4;   // ≤ 16 accumulators
    for (int64_t o = o_begin; o < o_end; o += 2 * NP) direct_block<NT, NP>(a, o, o_end);
}

void direct_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end) {
    MatmulArgs b = a;
    for (int64_t t = 0; t < a.n_rows; t += 4) {   // (n_rows ≤ kOuterDirectMaxRows in the callers)
        b.xb = a.xb + t * a.in;
        b.y = a.y + t * a.ldy;
        switch (std::min<int64_t>(4, a.n_rows - t)) {
            case 1: direct_rows<1>(b, o_begin, o_end); break;
            case 2: direct_rows<2>(b, o_begin, o_end); break;
            case 3: direct_rows<3>(b, o_begin, o_end); break;
            default: direct_rows<4>(b, o_begin, o_end); break;
        }
    }
}

// ---- panel: token pairs of the activation panel × weight steps broadcast ------------------

// How a thread's share is blocked, from this core's caches: kc steps per reduction chunk (3
// token pairs of it fill half of L1), nc weight rows per block (their chunk fills a quarter of
// L2), tv token pairs per pass (the chains of nc rows × tv pairs fill another quarter).
struct PanelPlan {
    int64_t kc, nc, tv;
};
const PanelPlan& panel_plan() {
    static const PanelPlan p = [] {
        const CacheSizes c = cache_sizes();
        PanelPlan q;
        q.kc = std::clamp<int64_t>(int64_t(c.l1d) / 2 / (3 * 64), 16, 512);
        q.nc = std::clamp<int64_t>(int64_t(c.l2) / 4 / (32 * q.kc) / 16 * 16, 16, 256);
        q.tv = std::clamp<int64_t>(int64_t(c.l2) / 4 / (64 * q.nc), 3, 64);
        return q;
    }();
    return p;
}

// NO weight rows (w: the chunk's first step, ws elements between rows) × NV token pairs (x: the
// chunk's first step, xs dwords between pairs) over ns steps; the chains start at +0 (first) or
// continue from c ([NO][NV][16] floats, cs floats between rows) and end there.
template <int NO, int NV>
inline void panel_tile(const uint16_t* w, int64_t ws, const uint32_t* x, int64_t xs, int64_t ns, float* c, int64_t cs,
                       bool first) {
    __m512 acc[NO][NV];
    for (int r = 0; r < NO; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * cs + 16 * v);
    for (int64_t s = 0; s < ns; ++s) {
        __m512i xv[NV];
        for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_si512(x + v * xs + 16 * s);
        for (int r = 0; r < NO; ++r) {
            const __m512i wb = step_both(w + r * ws + kStep * s);
            for (int v = 0; v < NV; ++v) acc[r][v] = madd(acc[r][v], xv[v], wb);
        }
    }
    for (int r = 0; r < NO; ++r)
        for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * cs + 16 * v, acc[r][v]);
}

template <int NV>
inline void panel_rows(int64_t nr, const uint16_t* w, int64_t ws, const uint32_t* x, int64_t xs, int64_t ns, float* c,
                       int64_t cs, bool first) {
    constexpr int NO = NV == 1 ? 16 : 8;
    int64_t r = 0;
    for (; r + NO <= nr; r += NO) panel_tile<NO, NV>(w + r * ws, ws, x, xs, ns, c + r * cs, cs, first);
    for (; r + 4 <= nr; r += 4) panel_tile<4, NV>(w + r * ws, ws, x, xs, ns, c + r * cs, cs, first);
    for (; r < nr; ++r) panel_tile<1, NV>(w + r * ws, ws, x, xs, ns, c + r * cs, cs, first);
}

void panel_range(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    const PanelPlan& p = panel_plan();
    const int64_t in = a.in, n_steps = in / kStep, n_vec = (a.n_rows + 1) / 2, xs = n_steps * 16;
    const auto* w = static_cast<const uint16_t*>(a.w);
    float* cbuf = scratch;   // [nc][tv][16] chains
    for (int64_t v0 = 0; v0 < n_vec; v0 += p.tv) {
        const int64_t nv = std::min(p.tv, n_vec - v0), cs = nv * 16;
        for (int64_t o = o_begin; o < o_end; o += p.nc) {
            const int64_t nr = std::min(p.nc, o_end - o);
            if (n_steps == 0) std::fill(cbuf, cbuf + nr * cs, 0.0f);
            for (int64_t k0 = 0; k0 < n_steps; k0 += p.kc) {
                const int64_t ns = std::min(p.kc, n_steps - k0);
                const uint16_t* wk = w + o * in + kStep * k0;
                for (int64_t v = 0; v < nv;) {   // token pairs in threes (a last four as two twos)
                    const int64_t left = nv - v, take = left == 4 ? 2 : std::min<int64_t>(3, left);
                    const uint32_t* x = a.xv + (v0 + v) * xs + 16 * k0;
                    float* c = cbuf + 16 * v;
                    if (take == 3)
                        panel_rows<3>(nr, wk, in, x, xs, ns, c, cs, k0 == 0);
                    else if (take == 2)
                        panel_rows<2>(nr, wk, in, x, xs, ns, c, cs, k0 == 0);
                    else
                        panel_rows<1>(nr, wk, in, x, xs, ns, c, cs, k0 == 0);
                    v += take;
                }
            }
            for (int64_t v = 0; v < nv; ++v)   // the finished chains to y[t, o + r]
                for (int64_t h = 0; h < 2; ++h) {
                    const int64_t t = 2 * (v0 + v) + h;
                    if (t >= a.n_rows) break;
                    for (int64_t r = 0; r < nr; ++r)
                        a.y[t * a.ldy + o + r] =
                            finish_output(cbuf + r * cs + 16 * v + 8 * h, a.xb + t * in, w + (o + r) * in, in);
                }
        }
    }
}

}   // namespace

int64_t outer_scratch_floats() {
    const PanelPlan& p = panel_plan();
    return p.nc * p.tv * 16;
}

void pack_token_pairs_avx512(const uint16_t* xb, int64_t n_rows, int64_t in, uint32_t* panel) {
    const int64_t n_steps = in / kStep;
    for (int64_t q = 0; 2 * q < n_rows; ++q) {
        const uint16_t* r0 = xb + 2 * q * in;
        const uint16_t* r1 = 2 * q + 1 < n_rows ? r0 + in : nullptr;
        uint32_t* out = panel + q * n_steps * 16;
        for (int64_t s = 0; s < n_steps; ++s) {
            const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + kStep * s));
            const __m256i hi =
                r1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + kStep * s)) : _mm256_setzero_si256();
            _mm512_storeu_si512(out + 16 * s, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        }
    }
}

void outer_range_avx512(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.xv) return panel_range(a, o_begin, o_end, scratch);
    direct_range(a, o_begin, o_end);
}

}   // namespace kimi::cpu
