// Comm: the processes one model spans — the ranks of an MPI job launched with mpirun, or just
// this process. Every collective combines ranks in a fixed rank order, never in the order
// messages arrive, so for a given number of ranks a sum is the same bits on every run and on
// every rank (the distributed counterpart of the engine's batch invariance). Counters report
// the bytes each rank sent and the time it spent in collectives.
// ref: MPI 3.1 (MPI_Allgather, MPI_Bcast); vLLM's tensor-parallel group (all-reduce after
// row-parallel layers, all-gather of vocabulary-parallel logits).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kimi::dist {

struct CommStats {
    int64_t collectives = 0, bytes_sent = 0;
    double seconds = 0.0;
};

class Comm {
public:
    // The process group: initialised on first use. Under an MPI launcher (mpirun / srun set
    // OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK) MPI with every rank of the job; otherwise
    // this process alone, without touching MPI.
    static Comm& world();
    // Whether this build can run under MPI at all (built with an MPI library).
    static bool mpi_built();

    int rank() const { return rank_; }
    int size() const { return size_; }
    bool distributed() const { return size_ > 1; }

    // x (same length on every rank) becomes Σ_r x_r, summed in rank order 0, 1, …, size-1 on
    // every rank: the same bits everywhere and on every run.
    void allreduce_sum(std::span<float> x);
    // root's bytes to every rank.
    void broadcast(void* data, int64_t bytes, int root = 0);
    // Each rank's `mine` (lengths may differ), concatenated in rank order on every rank.
    void allgather(std::span<const float> mine, std::vector<float>& all);
    void barrier();

    const CommStats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

    ~Comm();
    Comm(const Comm&) = delete;
    Comm& operator=(const Comm&) = delete;

private:
    Comm();
    int rank_ = 0, size_ = 1;
    bool mpi_ = false;
    CommStats stats_;
    std::vector<float> gathered_;   // [size, n]: kept, so a steady step allocates nothing
    std::vector<int> counts_, displs_;
};

// Splits n items (heads, experts, vocabulary rows) over `parts` ranks as evenly as possible:
// rank r gets [begin, end), the first n % parts ranks one more.
struct Range {
    int64_t begin = 0, end = 0;
    int64_t size() const { return end - begin; }
};
Range split(int64_t n, int parts, int r);

}  // namespace kimi::dist
