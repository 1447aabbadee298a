// The process group: even splits of heads/experts/vocabulary over ranks, and collectives that
// combine ranks in rank order — the same bits on every rank and every run. Run alone (one
// process, no MPI) and under `mpirun -np 2` and `-np 3` (tests/dist/CMakeLists.txt). The
// liveness channel: its setup and watcher on sockets within this process (and a child that is
// killed); and — with KIMI_TEST_PEER_LOST_VICTIM=r under mpirun — rank r exits in the middle of a
// collective, and every other rank gets PeerLost instead of hanging.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "dist/comm.h"
#include "dist/liveness.h"

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

TEST(Comm, LivenessRunsUnderMpi) {
    Comm& c = Comm::world();
    const char* off = std::getenv("KIMI_DIST_LIVENESS");
    EXPECT_EQ(c.liveness(), c.size() > 1 && !(off && std::string(off) == "0"));
    EXPECT_FALSE(c.peer_lost());
    EXPECT_EQ(c.peer_lost_reason(), "");
}

// ---- the liveness channel within this process ----

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

template <class F>
bool eventually(F done, std::chrono::milliseconds limit = 3000ms) {
    const auto end = Clock::now() + limit;
    while (!done()) {
        if (Clock::now() > end) return false;
        std::this_thread::sleep_for(2ms);
    }
    return true;
}

struct Pair {   // a connected pair of sockets: [0] rank 0's end, [1] rank 1's
    int fd[2] = {-1, -1};
    Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
    ~Pair() {
        for (int f : fd)
            if (f >= 0) close(f);
    }
    int take(int i) {
        const int f = fd[i];
        fd[i] = -1;
        return f;
    }
};

TEST(Liveness, SetUpOverTcpDroppingStrangers) {
    LivenessListener l;
    ASSERT_EQ(l.error(), "");
    const std::string advert = l.advert();
    std::vector<LivePeer> got(3);
    std::vector<std::string> errors(3);
    std::vector<std::thread> ranks;
    // a stranger: the right port, the wrong token — dropped, the setup goes on
    std::string bad = advert;
    bad.replace(bad.find('\n') + 1, 32, std::string(32, '0'));
    // as if on other hosts: rank 1 finds rank 0 by its host name ("localhost" here), rank 2 — for
    // which that name leads nowhere (a broadcast address: no DNS, fails at once) — by the addresses
    // in the advert
    auto with_host = [&](const std::string& host, const std::string& extra) {
        std::vector<std::string> lines;
        size_t at = 0;
        for (size_t nl; (nl = advert.find('\n', at)) != std::string::npos; at = nl + 1)
            lines.push_back(advert.substr(at, nl - at));
        lines[3] = host;
        std::string a;
        for (const std::string& x : lines) a += x + "\n";
        return a + extra;
    };
    const std::string adverts[3] = {"", with_host("localhost", ""), with_host("255.255.255.255", "127.0.0.1\n")};
    std::vector<LivePeer> peers;
    bool accepted = false;
    std::thread leader([&] { accepted = l.accept_all(3, 10.0, peers); });
    std::string bad_error;
    EXPECT_LT(connect_to_leader(bad, 1, 5.0, bad_error).fd, 0);
    for (int r = 1; r <= 2; ++r)
        ranks.emplace_back([&, r] { got[size_t(r)] = connect_to_leader(adverts[r], r, 10.0, errors[size_t(r)]); });
    for (auto& t : ranks) t.join();
    leader.join();
    EXPECT_TRUE(accepted) << l.error();
    EXPECT_NE(bad_error.find("closed the connection"), std::string::npos) << bad_error;
    ASSERT_EQ(peers.size(), 2u);
    for (int r = 1; r <= 2; ++r) {
        EXPECT_EQ(peers[size_t(r - 1)].rank, r);
        EXPECT_NE(peers[size_t(r - 1)].who.find("pid " + std::to_string(getpid())), std::string::npos);
        EXPECT_GE(got[size_t(r)].fd, 0) << errors[size_t(r)];
        EXPECT_EQ(got[size_t(r)].rank, 0);
    }
    // rank 0 watches ranks 1 and 2; rank 1 exits normally (says so), rank 2 dies
    std::atomic<int> calls{0};
    LivenessWatcher lead(0, 3, peers, {}, [&](const std::string&) { ++calls; });
    LivenessWatcher one(1, 3, {got[1]}, {});
    one.say_leaving();
    one.stop();
    EXPECT_TRUE(eventually([&] { return lead.leaving_since_ns() != 0; }));
    EXPECT_NE(lead.leaving_peer().find("MPI rank 1 of 3"), std::string::npos);
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(lead.lost());
    const auto t0 = Clock::now();
    close(got[2].fd);
    EXPECT_TRUE(eventually([&] { return lead.lost(); }));
    EXPECT_LT(Clock::now() - t0, 2s);   // at once: well under the 10 s silence limit
    EXPECT_NE(lead.reason().find("MPI rank 2 of 3 (pid "), std::string::npos) << lead.reason();
    EXPECT_NE(lead.reason().find("is gone (its connection closed"), std::string::npos) << lead.reason();
    EXPECT_EQ(calls.load(), 1);
}

TEST(Liveness, AKilledProcessIsLostAtOnce) {
    Pair p;
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {   // holds rank 1's end until killed; only async-signal-safe calls here
        close(p.fd[0]);
        for (;;) pause();
    }
    close(p.take(1));
    LivenessWatcher w(0, 2, {{1, p.take(0), "pid " + std::to_string(child) + " on here"}}, {});
    std::this_thread::sleep_for(30ms);
    EXPECT_FALSE(w.lost());
    const auto t0 = Clock::now();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    EXPECT_TRUE(eventually([&] { return w.lost(); }));
    EXPECT_LT(Clock::now() - t0, 2s);   // at once: well under the 10 s silence limit
    EXPECT_NE(w.reason().find("MPI rank 1 of 2 (pid " + std::to_string(child) + " on here) is gone"), std::string::npos)
        << w.reason();
}

TEST(Liveness, HeartbeatsKeepAPeerAliveAndSilenceLosesIt) {
    LivenessConfig cfg;
    cfg.heartbeat_s = 0.02;
    cfg.silence_s = 0.5;   // 25 heartbeats: a loaded machine (ctest -j, oversubscribed ranks) may skip a few
    {
        Pair p;
        LivenessWatcher lead(0, 2, {{1, p.take(0), ""}}, cfg), one(1, 2, {{0, p.take(1), ""}}, cfg);
        std::this_thread::sleep_for(1100ms);   // more than twice the silence limit
        EXPECT_FALSE(lead.lost()) << lead.reason();
        EXPECT_FALSE(one.lost()) << one.reason();
        lead.stop();   // rank 0 dies (no "leaving"): rank 1 sees it
        EXPECT_TRUE(eventually([&] { return one.lost(); }));
        EXPECT_NE(one.reason().find("MPI rank 0 of 2 is gone"), std::string::npos) << one.reason();
    }
    {
        Pair p;   // rank 1 stopped (a SIGSTOP): connected, but silent
        const auto t0 = Clock::now();
        LivenessWatcher lead(0, 2, {{1, p.take(0), ""}}, cfg);
        EXPECT_TRUE(eventually([&] { return lead.lost(); }));
        EXPECT_GE(Clock::now() - t0, 490ms);
        EXPECT_NE(lead.reason().find("MPI rank 1 of 2 has not been heard from for"), std::string::npos)
            << lead.reason();
    }
}

TEST(Liveness, RankZeroTellsTheOthersWhy) {
    Pair p;
    LivenessWatcher lead(0, 3, {{2, p.take(0), ""}}, {}), two(2, 3, {{0, p.take(1), "pid 1 on a"}}, {});
    lead.tell_lost("MPI rank 1 of 3 is gone (its connection closed)");
    EXPECT_TRUE(eventually([&] { return two.lost(); }));
    EXPECT_EQ(two.reason(), "MPI rank 0 of 3 (pid 1 on a) reports: MPI rank 1 of 3 is gone (its connection closed)");
    EXPECT_FALSE(lead.lost());
}

// ---- under mpirun: a rank exits in the middle of a collective ----

// KIMI_TEST_PEER_LOST_VICTIM=r: rank r exits (without a word) while the others wait in an
// all-reduce; each of them must throw PeerLost (within milliseconds) and print PEER-LOST-OK. The harness
// (tests/dist/CMakeLists.txt) runs mpirun with orte_abort_on_non_zero_status 0, so nobody else
// kills the survivors: they must also get out of the process on their own.
TEST(PeerLost, ARankExitsDuringACollective) {
    const char* v = std::getenv("KIMI_TEST_PEER_LOST_VICTIM");
    Comm& c = Comm::world();
    if (!v || c.size() < 2) GTEST_SKIP() << "set KIMI_TEST_PEER_LOST_VICTIM under mpirun";
    ASSERT_TRUE(c.liveness());
    const int victim = std::atoi(v);
    std::vector<float> x(1000, 1.0f);
    c.allreduce_sum(x);   // everyone is set up and in step
    c.barrier();
    if (c.rank() == victim) {
        std::this_thread::sleep_for(200ms);   // the others are waiting by now
        std::fflush(stdout);
        _exit(3);
    }
    std::atomic<int> called{0};
    std::string told;
    c.on_peer_lost([&](const std::string& why) {   // from the watcher thread, once
        told = why;
        ++called;
    });
    const auto t0 = Clock::now();
    std::string what;
    try {
        for (int i = 0; i < 1000000; ++i) c.allreduce_sum(x);
    } catch (const PeerLost& e) {
        what = e.what();
    }
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_FALSE(what.empty()) << "no PeerLost";
    EXPECT_TRUE(c.peer_lost());
    EXPECT_EQ(c.peer_lost_reason(), what);
    c.on_peer_lost({});
    EXPECT_EQ(called.load(), 1);
    EXPECT_EQ(told, what);
    int late = 0;   // registered after the loss: called at once
    c.on_peer_lost([&](const std::string&) { ++late; });
    c.on_peer_lost({});
    EXPECT_EQ(late, 1);
    // ~0.2 s (the victim's sleep) plus milliseconds; the bound is loose for sanitizer builds, whose
    // exiting victim takes a while to tear down its memory before the kernel closes its sockets
    EXPECT_LT(waited, 0.2 + 5.0);
    // the victim is named, directly (rank 0, or a rank whose rank 0 died) or in rank 0's report
    EXPECT_NE(what.find("MPI rank " + std::to_string(victim) + " of " + std::to_string(c.size()) + " ("),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("this job cannot go on"), std::string::npos) << what;
    EXPECT_THROW(c.barrier(), PeerLost);   // at once, without MPI
    std::vector<float> all;
    EXPECT_THROW(c.allgather(x, all), PeerLost);
    int64_t b = 0;
    EXPECT_THROW(c.broadcast(&b, sizeof b), PeerLost);
    std::printf("PEER-LOST-OK rank %d after %.3f s: %s\n", c.rank(), waited, what.c_str());
    std::fflush(stdout);
}

}   // namespace
}   // namespace kimi::dist
