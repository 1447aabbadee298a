// Comm: the processes one model spans — the ranks of an MPI job launched with mpirun, or just
// this process. Every collective combines ranks in a fixed rank order, never in the order
// messages arrive, so for a given number of ranks a sum is the same bits on every run and on
// every rank (the distributed counterpart of the engine's batch invariance). Counters report
// the bytes each rank sent and the time it spent in collectives.
// A rank that dies or stops is noticed within milliseconds (liveness.h: an out-of-band TCP
// channel; MPI itself would wait for it forever): from then on every collective — also one already
// waiting — throws PeerLost on every rank still alive, and peer_lost() says so.
// ref: MPI 3.1 (MPI_Allgather, MPI_Bcast); vLLM's tensor-parallel group (all-reduce after
// row-parallel layers, all-gather of vocabulary-parallel logits).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace kimi::dist {

// Another rank of the job is gone (died, was killed, stopped answering, or left early) or a
// collective failed: the group is broken for good, no collective can complete. The message names
// the rank, e.g. "MPI rank 1 of 2 (pid 4242 on host-a) is gone (its connection closed: …) — …".
class PeerLost : public Error {
public:
    explicit PeerLost(const std::string& what) : Error(what) {}
};

class LivenessWatcher;

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
    // Each collective above throws PeerLost once a peer is lost (at once when it already is; a
    // waiting one within about a millisecond), without calling MPI again.

    // Whether a peer of this rank is lost (thread-safe; also before any collective noticed), and
    // the message PeerLost carries ("" while none is).
    bool peer_lost() const { return lost_.load(std::memory_order_acquire); }
    std::string peer_lost_reason() const;
    // Calls fn(reason) once when a peer is lost — from the watcher thread, or from the thread of
    // the failing collective; at once if one already is. fn must be quick and thread-safe, and
    // must not call on_peer_lost. An empty fn unregisters: once that returns, fn is not running
    // and never runs again (unregister before whatever fn refers to goes away).
    void on_peer_lost(std::function<void(const std::string&)> fn);
    // Whether the liveness channel runs (MPI and more than one rank, unless KIMI_DIST_LIVENESS=0
    // or it could not be set up — then a warning said so).
    bool liveness() const { return live_ != nullptr; }

    const CommStats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

    ~Comm();
    Comm(const Comm&) = delete;
    Comm& operator=(const Comm&) = delete;

private:
    Comm();
    void start_liveness();
    void mark_lost(const std::string& reason);
    void break_group(const std::string& reason);   // a loss found here: tell the others (rank 0), mark it
    [[noreturn]] void fail(const char* what, const std::string& why);
    void throw_if_lost(const char* what);
    void check_collective(int rc, const char* what);   // a failed collective breaks the group: PeerLost
    void wait(int count, const char* what);            // completes direct_->reqs[0, count), or throws PeerLost
    struct Direct;
    int rank_ = 0, size_ = 1;
    bool mpi_ = false;
    std::unique_ptr<LivenessWatcher> live_;
    std::unique_ptr<Direct> direct_;   // set with live_: collectives as point-to-point messages
    std::atomic<bool> lost_{false};
    mutable std::mutex lost_mu_;
    std::string lost_reason_;
    std::mutex callback_mu_;   // held while on_lost_ runs
    std::function<void(const std::string&)> on_lost_;
    bool callback_done_ = false;
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

}   // namespace kimi::dist
