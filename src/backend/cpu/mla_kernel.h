// One task of the MLA attention (backend/cpu/mla.cpp): a group of up to kMlaGroup heads of one
// token against the positions [0, ctx) of its sequence's paged latent cache, in tiles of
// kMlaTile positions with an online softmax (flash-attention style: no [T, ctx] score matrix,
// a fixed 4 KiB of scores on the stack whatever the context). The tiles start at absolute
// positions 0, kMlaTile, …, so per (token, head) the arithmetic is fixed by the kernel the
// process picked (matmul_isa()) — independent of the grouping, the thread, the chunking and the
// batch. Two kernels: portable C++ (8-lane dot products, scalar sums) and AVX-512 (16-lane dot
// products, FMA weighted sums; kernels/mla_avx512.cpp).
#pragma once
#include <cstdint>

#include "backend/op_params.h"

namespace kimi::cpu {

constexpr int64_t kMlaGroup = 8;    // heads per task: each latent row read serves the whole group
constexpr int64_t kMlaTile = 128;   // positions per online-softmax tile

struct MlaTask {
    const ops::PagedLatents* cache;
    int64_t seq;      // row of the block tables
    int64_t ctx;      // positions attended: [0, ctx)
    const float* q;   // [nh, width] absorbed queries
    int64_t nh, width, rank;
    float scale;
    float* o;   // [nh, rank] output (written)
};

inline int64_t latent_row_offset(const ops::PagedLatents& c, int64_t seq, int64_t pos) {
    const int32_t block = c.block_tables[size_t(seq * c.max_blocks + pos / c.block_size)];
    return (int64_t(block) * c.block_size + pos % c.block_size) * c.row_width;
}

void mla_task_portable(const MlaTask& t);
void mla_task_avx512(const MlaTask& t);

}   // namespace kimi::cpu
