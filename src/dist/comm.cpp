// Comm implementation (see comm.h). With MPI (KIMI_HAVE_MPI) a job launched by mpirun uses
// MPI_COMM_WORLD; the sum is an all-gather followed by a local sum in rank order, so the
// result never depends on the reduction tree an MPI library picks. A process started without a
// launcher never initialises MPI.
#include "dist/comm.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

#ifdef KIMI_HAVE_MPI
#include <mpi.h>
#endif

namespace kimi::dist {

namespace {
bool launched_by_mpi() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
        if (std::getenv(v)) return true;
    return false;
}

class Timer {
public:
    explicit Timer(CommStats& s) : s_(s), t0_(std::chrono::steady_clock::now()) { ++s_.collectives; }
    ~Timer() { s_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

private:
    CommStats& s_;
    std::chrono::steady_clock::time_point t0_;
};

#ifdef KIMI_HAVE_MPI
void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) throw Error(std::string("MPI: ") + what + " failed");
}
#endif
}  // namespace

bool Comm::mpi_built() {
#ifdef KIMI_HAVE_MPI
    return true;
#else
    return false;
#endif
}

Comm& Comm::world() {
    static Comm c;
    return c;
}

Comm::Comm() {
    if (!launched_by_mpi()) return;
#ifdef KIMI_HAVE_MPI
    int provided = 0;
    // why: SERIALIZED — the engine thread (not main) issues the collectives, one at a time.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED) throw Error("MPI: the library does not support MPI_THREAD_SERIALIZED");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    mpi_ = true;
#else
    throw Error("launched by an MPI launcher, but this kimi-cpp was built without MPI (install libopenmpi-dev: make deps, then rebuild)");
#endif
}

Comm::~Comm() {
#ifdef KIMI_HAVE_MPI
    int finalized = 0;
    if (mpi_ && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
#endif
}

void Comm::allreduce_sum(std::span<float> x) {
    if (size_ == 1) return;
#ifdef KIMI_HAVE_MPI
    Timer t(stats_);
    const size_t n = x.size();
    if (gathered_.size() < n * size_t(size_)) gathered_.resize(n * size_t(size_));
    check(MPI_Allgather(x.data(), int(n), MPI_FLOAT, gathered_.data(), int(n), MPI_FLOAT, MPI_COMM_WORLD), "MPI_Allgather");
    stats_.bytes_sent += int64_t(n * sizeof(float)) * (size_ - 1);
    std::memcpy(x.data(), gathered_.data(), n * sizeof(float));
    for (int r = 1; r < size_; ++r) {
        const float* src = gathered_.data() + size_t(r) * n;
        for (size_t i = 0; i < n; ++i) x[i] += src[i];
    }
#endif
}

void Comm::broadcast(void* data, int64_t bytes, int root) {
    if (size_ == 1) return;
#ifdef KIMI_HAVE_MPI
    Timer t(stats_);
    KIMI_CHECK(bytes >= 0 && bytes <= INT32_MAX, "broadcast size");
    check(MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    if (rank_ == root) stats_.bytes_sent += bytes * (size_ - 1);
#else
    (void)data, (void)bytes, (void)root;
#endif
}

void Comm::allgather(std::span<const float> mine, std::vector<float>& all) {
    if (size_ == 1) {
        all.assign(mine.begin(), mine.end());
        return;
    }
#ifdef KIMI_HAVE_MPI
    Timer t(stats_);
    counts_.resize(size_t(size_));
    displs_.resize(size_t(size_));
    const int n = int(mine.size());
    check(MPI_Allgather(&n, 1, MPI_INT, counts_.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    int total = 0;
    for (int r = 0; r < size_; ++r) {
        displs_[size_t(r)] = total;
        total += counts_[size_t(r)];
    }
    all.resize(size_t(total));
    check(MPI_Allgatherv(mine.data(), n, MPI_FLOAT, all.data(), counts_.data(), displs_.data(), MPI_FLOAT, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    stats_.bytes_sent += int64_t(n) * 4 * (size_ - 1);
#endif
}

void Comm::barrier() {
#ifdef KIMI_HAVE_MPI
    if (size_ > 1) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

Range split(int64_t n, int parts, int r) {
    KIMI_CHECK(parts >= 1 && r >= 0 && r < parts && n >= 0, "split");
    const int64_t base = n / parts, extra = n % parts;
    const int64_t begin = r * base + std::min<int64_t>(r, extra);
    return {begin, begin + base + (r < extra ? 1 : 0)};
}

}  // namespace kimi::dist
