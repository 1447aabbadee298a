// The KDA recurrence of one (sequence, head) over its tokens (see kda.cpp), as an inline
// function compiled twice: portable (kda.cpp) and in an AVX-512 translation unit
// (kernels/kda_avx512.cpp) where the compiler vectorizes the loops over the value dimension
// 16 lanes wide. Every operation is element-wise along that dimension (no reduction changes
// order) and the build never contracts a·b + c into an FMA (-ffp-contract=off), so both
// compilations give the same bits.
#pragma once
#include <cmath>
#include <cstdint>

namespace kimi::cpu {

struct KdaHeadArgs {
    const float *q, *k, *v, *g, *beta;   // rows of token t at (t * row_stride) (+ head offset applied)
    float* o;
    int64_t row_stride_k, row_stride_v, beta_stride;   // elements between consecutive tokens' rows
    int64_t t_begin, t_end, dk, dv;
    float* state;   // [dk, dv]
};

// static: compiled into the portable and the AVX-512 TU, each keeps its own copy (no ODR merge).
static inline void kda_head_portable_body(const KdaHeadArgs& a, float* __restrict uv) {
    float* __restrict s = a.state;
    for (int64_t t = a.t_begin; t < a.t_end; ++t) {
        const float* __restrict qt = a.q + t * a.row_stride_k;
        const float* __restrict kt = a.k + t * a.row_stride_k;
        const float* __restrict gt = a.g + t * a.row_stride_k;
        const float* __restrict vt = a.v + t * a.row_stride_v;
        float* __restrict ot = a.o + t * a.row_stride_v;
        const float bt = a.beta[t * a.beta_stride];
        const int64_t dk = a.dk, dv = a.dv;
        // decay and predict: S[d,:] *= exp(g[d]); p += k[d] * S[d,:]
        for (int64_t j = 0; j < dv; ++j) uv[j] = 0.0f;
        for (int64_t d = 0; d < dk; ++d) {
            const float e = std::exp(gt[d]), kd = kt[d];
            float* __restrict sr = s + d * dv;
            for (int64_t j = 0; j < dv; ++j) {
                sr[j] *= e;
                uv[j] += kd * sr[j];
            }
        }
        for (int64_t j = 0; j < dv; ++j) uv[j] = bt * (vt[j] - uv[j]);
        // write and read: S[d,:] += k[d] * u; o += q[d] * S[d,:]
        for (int64_t j = 0; j < dv; ++j) ot[j] = 0.0f;
        for (int64_t d = 0; d < dk; ++d) {
            const float kd = kt[d], qd = qt[d];
            float* __restrict sr = s + d * dv;
            for (int64_t j = 0; j < dv; ++j) {
                sr[j] += kd * uv[j];
                ot[j] += qd * sr[j];
            }
        }
    }
}

void kda_head_portable(const KdaHeadArgs& a, float* uv);
void kda_head_avx512(const KdaHeadArgs& a, float* uv);

}   // namespace kimi::cpu
