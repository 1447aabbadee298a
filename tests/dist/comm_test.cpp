// The process group: even splits of heads/experts/vocabulary over ranks, and collectives that
// combine ranks in rank order — the same bits on every rank and every run. Run alone (one
// process, no MPI) and under `mpirun -np 2` and `-np 3` (tests/dist/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "dist/comm.h"

namespace kimi::dist {
namespace {

// Rank r's contribution at i: magnitudes far apart, so the order of the sum changes the bits.
float contribution(int r, size_t i) {
    const float big = (i % 3 == 0) ? 1e8f : 1.0f;
    return (r % 2 ? -big : big) * (1.0f + 0.37f * float(r)) + std::sin(float(i * 7 + size_t(r)));
}

TEST(Split, EvenCoverInOrder) {
    for (int64_t n : {0, 1, 5, 7, 32, 33, 896})
        for (int parts : {1, 2, 3, 7}) {
            int64_t next = 0, lo = n, hi = 0;
            for (int r = 0; r < parts; ++r) {
                const Range g = split(n, parts, r);
                EXPECT_EQ(g.begin, next) << n << "/" << parts;
                next = g.end;
                lo = std::min(lo, g.size());
                hi = std::max(hi, g.size());
            }
            EXPECT_EQ(next, n);
            EXPECT_LE(hi - lo, 1);
        }
}

TEST(Comm, AllreduceSumsInRankOrderEverywhere) {
    Comm& c = Comm::world();
    for (size_t n : {size_t(1), size_t(17), size_t(4096 + 3)}) {
        std::vector<float> x(n), want(n);
        for (size_t i = 0; i < n; ++i) {
            x[i] = contribution(c.rank(), i);
            float s = contribution(0, i);
            for (int r = 1; r < c.size(); ++r) s += contribution(r, i);
            want[i] = s;
        }
        c.allreduce_sum(x);
        EXPECT_EQ(0, std::memcmp(x.data(), want.data(), n * sizeof(float))) << "n " << n;
        std::vector<float> everyone;   // the result of every rank, side by side: all the same bits
        c.allgather(x, everyone);
        ASSERT_EQ(everyone.size(), n * size_t(c.size()));
        for (int r = 1; r < c.size(); ++r) EXPECT_EQ(0, std::memcmp(everyone.data() + size_t(r) * n, x.data(), n * 4));
    }
}

TEST(Comm, BroadcastAndUnevenGather) {
    Comm& c = Comm::world();
    int64_t v[3] = {c.rank() == 0 ? 42 : -1, c.rank() == 0 ? 7 : -1, c.size()};
    c.broadcast(v, sizeof v);
    EXPECT_EQ(v[0], 42);
    EXPECT_EQ(v[1], 7);
    std::vector<float> mine(size_t(c.rank() + 1), float(c.rank())), all;   // rank r sends r + 1 values
    c.allgather(mine, all);
    ASSERT_EQ(all.size(), size_t(c.size() * (c.size() + 1) / 2));
    size_t k = 0;
    for (int r = 0; r < c.size(); ++r)
        for (int j = 0; j <= r; ++j) EXPECT_EQ(all[k++], float(r));
    c.barrier();
    EXPECT_GT(c.stats().collectives, c.size() > 1 ? 0 : -1);
}

}  // namespace
}  // namespace kimi::dist
