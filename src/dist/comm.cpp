// Comm implementation (see comm.h). With MPI (KIMI_HAVE_MPI) a job launched by mpirun uses
// MPI_COMM_WORLD; the sum is an all-gather followed by a local sum in rank order, so the
// result never depends on the reduction tree an MPI library picks. A process started without a
// launcher never initialises MPI.
// With the liveness channel (liveness.h) every collective is non-blocking point-to-point messages
// (Comm::Direct) waited for by polling MPI_Testall — spinning for the first millisecond (as a
// blocking MPI call would), then yielding, then sleeping briefly — so a lost peer ends the wait
// instead of hanging in MPI.
#include "dist/comm.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "dist/liveness.h"

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

using Clock = std::chrono::steady_clock;
// A rank that said it is leaving while this one still waits in a collective for this long left
// too early (it exits after an error of its own): the wait cannot end.
constexpr auto kLeavingGrace = std::chrono::seconds(2);
// Message tags of the point-to-point collectives (one kind of collective, one tag).
constexpr int kTagSum = 1, kTagBcast = 2, kTagCounts = 3, kTagGather = 4;
constexpr const char* kCannotGoOn = " — a collective needs every rank, so this job cannot go on";

#ifdef KIMI_HAVE_MPI
std::string mpi_error(int rc) {
    char s[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) return "error " + std::to_string(rc);
    return std::string(s, size_t(std::max(0, len)));
}
void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) throw Error(std::string("MPI: ") + what + " failed: " + mpi_error(rc));
}

double env_seconds(const char* name, double fallback, int rank) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end && *end == 0 && x >= 0 && x <= 1e6) return x;
    if (rank == 0)
        std::fprintf(stderr, "kimi-cpp: warning: %s=%s is not a number of seconds; using %g\n", name, v, fallback);
    return fallback;
}
#endif
}   // namespace

#ifdef KIMI_HAVE_MPI
// With the liveness channel, collectives are point-to-point messages on a communicator of their own,
// waited for with MPI_Testall — as fast as the blocking collectives for the few ranks of a split
// model (Open MPI's non-blocking collectives take about twice as long: each call builds a schedule).
struct Comm::Direct {
    MPI_Comm comm = MPI_COMM_NULL;   // a duplicate of MPI_COMM_WORLD
    std::vector<MPI_Request> reqs;   // 2 (size - 1): a receive and a send per other rank
};
#else
struct Comm::Direct {};
#endif

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
    // why: a failing call returns (and throws) instead of aborting the job from inside MPI.
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    if (size_ > 1) start_liveness();
#else
    throw Error(
        "launched by an MPI launcher, but this kimi-cpp was built without MPI (install libopenmpi-dev: make deps, then "
        "rebuild)");
#endif
}

// Sets up the liveness channel: rank 0 listens and broadcasts its advert, the others connect;
// it runs only if every rank got through (otherwise a warning, and a lost rank hangs the job as
// it always did with MPI alone).
void Comm::start_liveness() {
#ifdef KIMI_HAVE_MPI
    // every rank takes part in the vote, so ranks that see different environments agree
    const char* off = std::getenv("KIMI_DIST_LIVENESS");
    const int want = !(off && std::string(off) == "0");
    int all_want = 0;
    check(MPI_Allreduce(&want, &all_want, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (!all_want) {
        if (want)
            std::fprintf(stderr,
                         "kimi-cpp: warning: MPI rank %d: KIMI_DIST_LIVENESS=0 on another rank: no liveness channel\n",
                         rank_);
        return;
    }
    LivenessConfig cfg;
    cfg.silence_s = env_seconds("KIMI_DIST_PEER_TIMEOUT", cfg.silence_s, rank_);
    const double connect_s = env_seconds("KIMI_DIST_CONNECT_TIMEOUT", 15.0, rank_);
    std::unique_ptr<LivenessListener> listener;
    std::string advert, error;
    if (rank_ == 0) {
        listener = std::make_unique<LivenessListener>();
        if (listener->error().empty())
            advert = listener->advert();
        else
            error = listener->error();
    }
    int64_t len = int64_t(advert.size());
    check(MPI_Bcast(&len, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
    advert.resize(size_t(len));
    check(MPI_Bcast(advert.data(), int(len), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    std::vector<LivePeer> peers;
    int ok = 0;
    if (len > 0 && rank_ == 0) {
        ok = listener->accept_all(size_, connect_s + 5, peers);   // why +5: the others give up first
        if (!ok) error = listener->error();
    } else if (len > 0) {
        LivePeer p = connect_to_leader(advert, rank_, connect_s, error);
        ok = p.fd >= 0;
        if (ok) peers.push_back(std::move(p));
    }
    listener.reset();
    int all_ok = 0;
    check(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (!all_ok) {
        for (const LivePeer& p : peers)
            if (p.fd >= 0) close(p.fd);
        if (!error.empty()) std::fprintf(stderr, "kimi-cpp: warning: MPI rank %d: %s\n", rank_, error.c_str());
        if (rank_ == 0)
            std::fprintf(stderr,
                         "kimi-cpp: warning: no liveness channel between the MPI ranks: if a rank dies, the others "
                         "wait for it forever (rank 0 must be reachable over TCP from every rank)\n");
        return;
    }
    direct_ = std::make_unique<Direct>();
    check(MPI_Comm_dup(MPI_COMM_WORLD, &direct_->comm), "MPI_Comm_dup");
    direct_->reqs.assign(size_t(2 * (size_ - 1)), MPI_REQUEST_NULL);
    live_ = std::make_unique<LivenessWatcher>(rank_, size_, std::move(peers), cfg,
                                              [this](const std::string& why) { mark_lost(why + kCannotGoOn); });
#endif
}

Comm::~Comm() {
    on_peer_lost({});
#ifdef KIMI_HAVE_MPI
    if (!mpi_) return;
    // A rank leaving normally says so first, so the others take its closing connection for no loss.
    if (live_ && !peer_lost()) live_->say_leaving();
    int finalized = 0;
    // why not after a loss: MPI_Finalize waits for every rank, the lost one too — forever.
    if (!peer_lost() && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) {
        if (direct_) MPI_Comm_free(&direct_->comm);
        MPI_Finalize();
    }
    live_.reset();   // after MPI_Finalize: the others see this connection close only once it is done
#endif
}

std::string Comm::peer_lost_reason() const {
    std::lock_guard<std::mutex> lk(lost_mu_);
    return lost_reason_;
}

void Comm::on_peer_lost(std::function<void(const std::string&)> fn) {
    std::lock_guard<std::mutex> cb(callback_mu_);
    on_lost_ = std::move(fn);
    callback_done_ = false;
    if (on_lost_ && peer_lost()) {
        callback_done_ = true;
        on_lost_(peer_lost_reason());
    }
}

void Comm::mark_lost(const std::string& reason) {
    {
        std::lock_guard<std::mutex> lk(lost_mu_);
        if (lost_.load(std::memory_order_relaxed)) return;
        lost_reason_ = reason;
        lost_.store(true, std::memory_order_release);
    }
    // why under callback_mu_: once on_peer_lost({}) returns, no call of the old fn is running
    std::lock_guard<std::mutex> cb(callback_mu_);
    if (on_lost_ && !callback_done_) {
        callback_done_ = true;
        on_lost_(reason);
    }
}

void Comm::break_group(const std::string& reason) {
    if (peer_lost()) return;
    if (live_ && rank_ == 0) live_->tell_lost(reason);
    mark_lost(reason + kCannotGoOn);
}

void Comm::fail(const char* what, const std::string& why) {
    if (!why.empty())
        break_group(std::string("MPI rank ") + std::to_string(rank_) + ": " + what + " failed (" + why + ")");
    throw PeerLost(peer_lost_reason());
}

void Comm::throw_if_lost(const char* what) {
    if (lost_.load(std::memory_order_acquire)) fail(what, "");
}

void Comm::check_collective(int rc, const char* what) {
#ifdef KIMI_HAVE_MPI
    if (rc != MPI_SUCCESS) fail(what, mpi_error(rc));
#else
    (void)rc, (void)what;
#endif
}

void Comm::wait(int count, const char* what) {
#ifdef KIMI_HAVE_MPI
    MPI_Request* reqs = direct_->reqs.data();
    const auto t0 = Clock::now();
    for (;;) {
        int done = 0;
        const int rc = MPI_Testall(count, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) fail(what, mpi_error(rc));
        if (done) return;
        // The requests stay pending for good: no MPI call follows a loss, so nothing touches their buffers.
        throw_if_lost(what);
        const auto now = Clock::now();
        const auto waited = now - t0;
        if (waited < std::chrono::milliseconds(1)) continue;   // the usual wait: a blocking call spins too
        if (const int64_t since = live_->leaving_since_ns();
            since && now - Clock::time_point(Clock::duration(since)) > kLeavingGrace) {
            break_group(live_->leaving_peer() + " left the job (it exits, after an error of its own?) while MPI rank " +
                        std::to_string(rank_) + " still waits for it in " + what);
            fail(what, "");
        }
        if (waited < std::chrono::milliseconds(20))
            sched_yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(waited < std::chrono::milliseconds(200) ? 50 : 500));
    }
#else
    (void)count, (void)what;
#endif
}

void Comm::allreduce_sum(std::span<float> x) {
    if (size_ == 1) return;
#ifdef KIMI_HAVE_MPI
    throw_if_lost("MPI_Allgather");
    Timer t(stats_);
    const size_t n = x.size();
    if (gathered_.size() < n * size_t(size_)) gathered_.resize(n * size_t(size_));
    if (direct_) {
        MPI_Request* rq = direct_->reqs.data();
        int k = 0;
        for (int i = 1; i < size_; ++i) {
            const int q = (rank_ + i) % size_;
            check_collective(
                MPI_Irecv(gathered_.data() + size_t(q) * n, int(n), MPI_FLOAT, q, kTagSum, direct_->comm, &rq[k++]),
                "MPI_Irecv");
        }
        for (int i = 1; i < size_; ++i)
            check_collective(
                MPI_Isend(x.data(), int(n), MPI_FLOAT, (rank_ + i) % size_, kTagSum, direct_->comm, &rq[k++]),
                "MPI_Isend");
        std::memcpy(gathered_.data() + size_t(rank_) * n, x.data(), n * sizeof(float));
        wait(k, "MPI_Allgather");
    } else {
        check_collective(
            MPI_Allgather(x.data(), int(n), MPI_FLOAT, gathered_.data(), int(n), MPI_FLOAT, MPI_COMM_WORLD),
            "MPI_Allgather");
    }
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
    throw_if_lost("MPI_Bcast");
    Timer t(stats_);
    KIMI_CHECK(bytes >= 0 && bytes <= INT32_MAX, "broadcast size");
    if (direct_) {
        MPI_Request* rq = direct_->reqs.data();
        int k = 0;
        if (rank_ == root) {
            for (int i = 1; i < size_; ++i)
                check_collective(
                    MPI_Isend(data, int(bytes), MPI_BYTE, (root + i) % size_, kTagBcast, direct_->comm, &rq[k++]),
                    "MPI_Isend");
        } else {
            check_collective(MPI_Irecv(data, int(bytes), MPI_BYTE, root, kTagBcast, direct_->comm, &rq[k++]),
                             "MPI_Irecv");
        }
        wait(k, "MPI_Bcast");
    } else {
        check_collective(MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
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
    throw_if_lost("MPI_Allgather");
    Timer t(stats_);
    counts_.resize(size_t(size_));
    displs_.resize(size_t(size_));
    const int n = int(mine.size());
    MPI_Request* rq = direct_ ? direct_->reqs.data() : nullptr;
    if (direct_) {
        int k = 0;
        for (int i = 1; i < size_; ++i) {
            const int q = (rank_ + i) % size_;
            check_collective(MPI_Irecv(&counts_[size_t(q)], 1, MPI_INT, q, kTagCounts, direct_->comm, &rq[k++]),
                             "MPI_Irecv");
        }
        for (int i = 1; i < size_; ++i)
            check_collective(MPI_Isend(&n, 1, MPI_INT, (rank_ + i) % size_, kTagCounts, direct_->comm, &rq[k++]),
                             "MPI_Isend");
        counts_[size_t(rank_)] = n;
        wait(k, "MPI_Allgather");
    } else {
        check_collective(MPI_Allgather(&n, 1, MPI_INT, counts_.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    }
    int total = 0;
    for (int r = 0; r < size_; ++r) {
        displs_[size_t(r)] = total;
        total += counts_[size_t(r)];
    }
    all.resize(size_t(total));
    if (direct_) {
        int k = 0;
        for (int i = 1; i < size_; ++i) {
            const int q = (rank_ + i) % size_;
            check_collective(MPI_Irecv(all.data() + displs_[size_t(q)], counts_[size_t(q)], MPI_FLOAT, q, kTagGather,
                                       direct_->comm, &rq[k++]),
                             "MPI_Irecv");
        }
        for (int i = 1; i < size_; ++i)
            check_collective(
                MPI_Isend(mine.data(), n, MPI_FLOAT, (rank_ + i) % size_, kTagGather, direct_->comm, &rq[k++]),
                "MPI_Isend");
        if (n > 0) std::memcpy(all.data() + displs_[size_t(rank_)], mine.data(), size_t(n) * sizeof(float));
        wait(k, "MPI_Allgatherv");
    } else {
        check_collective(MPI_Allgatherv(mine.data(), n, MPI_FLOAT, all.data(), counts_.data(), displs_.data(),
                                        MPI_FLOAT, MPI_COMM_WORLD),
                         "MPI_Allgatherv");
    }
    stats_.bytes_sent += int64_t(n) * 4 * (size_ - 1);
#endif
}

void Comm::barrier() {
#ifdef KIMI_HAVE_MPI
    if (size_ == 1) return;
    throw_if_lost("MPI_Barrier");
    if (direct_) {
        check_collective(MPI_Ibarrier(direct_->comm, direct_->reqs.data()), "MPI_Ibarrier");
        wait(1, "MPI_Barrier");
    } else {
        check_collective(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    }
#endif
}

Range split(int64_t n, int parts, int r) {
    KIMI_CHECK(parts >= 1 && r >= 0 && r < parts && n >= 0, "split");
    const int64_t base = n / parts, extra = n % parts;
    const int64_t begin = r * base + std::min<int64_t>(r, extra);
    return {begin, begin + base + (r < extra ? 1 : 0)};
}

}   // namespace kimi::dist
