// Liveness: an out-of-band TCP channel between rank 0 and every other rank of an MPI job, which
// tells a rank within milliseconds that a peer is gone — what MPI itself never reports (a
// collective with a dead peer waits forever). The kernel closes a dead process's sockets, so a
// rank that dies, crashes or is killed closes its connection; a rank that is stopped (SIGSTOP, a
// debugger) or whose host froze stops sending heartbeats. A rank that exits normally says so
// first ("leaving"), so its closing connection is no alarm.
// Setup: rank 0 listens (LivenessListener) and MPI-broadcasts its advert (a random token, the
// port, its host name and addresses); every other rank connects (connect_to_leader) and says
// hello with the token. Then a LivenessWatcher thread on each rank watches the sockets.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kimi::dist {

// One connection of the channel: the rank at its other end and that rank's socket.
struct LivePeer {
    int rank = -1;
    int fd = -1;
    std::string who;   // "pid 123 on host-a": for messages
};

// Rank 0's listening socket, open only while the job sets up.
class LivenessListener {
public:
    // Listens on every interface (IPv6 and IPv4 where it can) at a port the system picks; error()
    // says why not.
    LivenessListener();
    ~LivenessListener();
    LivenessListener(const LivenessListener&) = delete;
    LivenessListener& operator=(const LivenessListener&) = delete;

    const std::string& error() const { return error_; }
    int port() const { return port_; }
    // What the other ranks need to connect: token, port, this host's name, pid and addresses.
    std::string advert() const;
    // Waits until each of ranks 1 .. size-1 has connected and said hello with the token (anything
    // else that connects is dropped); their sockets, in rank order. False (error()) at the deadline.
    bool accept_all(int size, double timeout_s, std::vector<LivePeer>& peers);

private:
    int fd_ = -1, port_ = 0;
    std::string token_, error_;
};

// A rank other than 0: connects to rank 0 from its advert — this host first when rank 0 runs on
// it, then rank 0's host name as this host resolves it, then rank 0's own addresses — and says
// hello. The peer (rank 0's socket), or fd -1 and `error`.
LivePeer connect_to_leader(const std::string& advert, int rank, double timeout_s, std::string& error);

struct LivenessConfig {
    double heartbeat_s = 0.25;   // a non-zero rank sends a heartbeat this often
    double silence_s = 10.0;     // rank 0 declares a peer lost after this long without one (0: never)
};

// Watches the sockets of a rank (rank 0: one per other rank; another rank: the one to rank 0) on
// a thread of its own. The first loss (a connection closed or broken without "leaving" first, or
// a heartbeat overdue) sets lost() and reason() and calls on_lost(reason) once, from that thread.
class LivenessWatcher {
public:
    LivenessWatcher(int rank, int size, std::vector<LivePeer> peers, LivenessConfig cfg,
                    std::function<void(const std::string&)> on_lost = {});
    ~LivenessWatcher();   // stop()
    LivenessWatcher(const LivenessWatcher&) = delete;
    LivenessWatcher& operator=(const LivenessWatcher&) = delete;

    bool lost() const { return lost_.load(std::memory_order_acquire); }
    std::string reason() const;
    // A peer said it is leaving (exiting normally): when the first did (steady clock, ns since
    // its epoch), 0 if none; and a description of it ("MPI rank 1 of 2 (pid …)").
    int64_t leaving_since_ns() const { return leaving_since_ns_.load(std::memory_order_acquire); }
    std::string leaving_peer() const;
    // Tells every peer that this rank is leaving: its closing connection is expected, and from now
    // on this rank's watcher takes no closing connection for a loss either.
    void say_leaving();
    // Rank 0: tells every other rank that the job is broken and why (their watchers report it as
    // their loss). The watcher does so itself for a loss it found.
    void tell_lost(const std::string& reason);
    // Ends the thread and closes the sockets (a loss is no longer reported).
    void stop();

private:
    struct Watched {
        LivePeer peer;
        bool open = true, leaving = false, in_report = false;
        std::chrono::steady_clock::time_point last_heard;
        std::string report;   // an 'X' message so far
    };
    void run();
    void read_from(Watched& w);
    void lose(const std::string& reason);
    std::string describe(const LivePeer& p) const;

    int rank_, size_;
    LivenessConfig cfg_;
    std::vector<Watched> watched_;
    std::function<void(const std::string&)> on_lost_;
    int wake_[2] = {-1, -1};
    std::atomic<bool> lost_{false}, stop_{false}, leaving_{false};
    std::atomic<int64_t> leaving_since_ns_{0};
    mutable std::mutex mu_;
    std::string reason_, leaving_peer_;
    std::thread thread_;
};

}   // namespace kimi::dist
