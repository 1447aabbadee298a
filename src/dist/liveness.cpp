// Liveness channel (see liveness.h): rank 0's listener and advert, the hello of the other ranks,
// and the watcher thread. Messages on a connection: 'H' (a heartbeat, sent by the non-zero rank),
// 'L' (leaving: the sender exits normally) and 'X' <reason> '\n' (from rank 0: the job is broken). Every socket is close-on-exec,
// so a child process never keeps a dead rank's connection open.
#include "dist/liveness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

namespace kimi::dist {

namespace {
constexpr const char* kMagic = "kimi-liveness 1";
using Clock = std::chrono::steady_clock;

std::string host_name() {
    char h[256] = {};
    if (gethostname(h, sizeof h - 1) != 0) return "localhost";
    return h;
}

std::string os_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

int ms_left(Clock::time_point deadline) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return ms <= 0 ? 0 : int(std::min<int64_t>(ms, 1 << 30));
}

// This host's addresses other ranks may reach it at: IPv4, then global IPv6; no loopback.
std::vector<std::string> host_addresses() {
    std::vector<std::string> v4, v6;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return {};
    for (ifaddrs* a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr) continue;
        char buf[INET6_ADDRSTRLEN] = {};
        if (a->ifa_addr->sa_family == AF_INET) {
            const auto* s = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
            if ((ntohl(s->sin_addr.s_addr) >> 24) == 127) continue;
            if (inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf)) v4.push_back(buf);
        } else if (a->ifa_addr->sa_family == AF_INET6) {
            const auto* s = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
            if (IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr)) continue;
            if (inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf)) v6.push_back(buf);
        }
    }
    freeifaddrs(list);
    v4.insert(v4.end(), v6.begin(), v6.end());
    return v4;
}

std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

bool send_all(int fd, const std::string& s, Clock::time_point deadline) {
    size_t off = 0;
    while (off < s.size()) {
        const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += size_t(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            pollfd p{fd, POLLOUT, 0};
            if (poll(&p, 1, ms_left(deadline)) <= 0) return false;
        } else {
            return false;
        }
    }
    return true;
}

// Connects (non-blocking, so a silent address costs at most connect_by) and says hello, waiting
// for the answer until `deadline`; the socket, or -1 and `error`.
int try_connect(const sockaddr* addr, socklen_t len, const std::string& hello, Clock::time_point connect_by,
                Clock::time_point deadline, std::string& error) {
    const int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        error = os_error("socket");
        return -1;
    }
    auto fail = [&](const std::string& e) {
        error = e;
        close(fd);
        return -1;
    };
    if (connect(fd, addr, len) != 0) {
        if (errno != EINPROGRESS) return fail(os_error("connect"));
        pollfd p{fd, POLLOUT, 0};
        if (poll(&p, 1, ms_left(connect_by)) <= 0) return fail("connect: timed out");
        int so = 0;
        socklen_t sl = sizeof so;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) != 0 || so != 0)
            return fail(std::string("connect: ") + std::strerror(so));
    }
    if (!send_all(fd, hello, deadline)) return fail(os_error("send hello"));
    std::string reply;
    while (reply.find('\n') == std::string::npos) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, ms_left(deadline)) <= 0) return fail("no answer to the hello in time");
        char buf[64];
        const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0) return fail("rank 0 closed the connection (a wrong token?)");
        if (n < 0 && errno != EAGAIN && errno != EINTR) return fail(os_error("recv"));
        if (n > 0) reply.append(buf, size_t(n));
        if (reply.size() > 64) return fail("a garbled answer to the hello");
    }
    if (reply != "ok\n") return fail("a garbled answer to the hello");
    return fd;
}
}   // namespace

// ---- rank 0: the listener ----

LivenessListener::LivenessListener() {
    std::random_device rd;
    char hex[33] = {};
    for (int i = 0; i < 4; ++i) std::snprintf(hex + 8 * i, 9, "%08x", unsigned(rd()));
    token_ = hex;
    // IPv6 with IPv4-mapped addresses (one socket for both); IPv4 alone where IPv6 is off.
    fd_ = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ >= 0) {
        int off = 0;
        setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            close(fd_);
            fd_ = -1;
        }
    }
    if (fd_ < 0) {
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            error_ = os_error("liveness: bind");
            if (fd_ >= 0) close(fd_);
            fd_ = -1;
            return;
        }
    }
    sockaddr_storage got{};
    socklen_t len = sizeof got;
    if (listen(fd_, 128) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&got), &len) != 0) {
        error_ = os_error("liveness: listen");
        close(fd_);
        fd_ = -1;
        return;
    }
    port_ = ntohs(got.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&got)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&got)->sin_port);
}

LivenessListener::~LivenessListener() {
    if (fd_ >= 0) close(fd_);
}

std::string LivenessListener::advert() const {
    std::string s = std::string(kMagic) + "\n" + token_ + "\n" + std::to_string(port_) + "\n" + host_name() + "\n" +
        std::to_string(getpid()) + "\n";
    for (const std::string& a : host_addresses()) s += a + "\n";
    return s;
}

bool LivenessListener::accept_all(int size, double timeout_s, std::vector<LivePeer>& peers) {
    peers.assign(size_t(std::max(0, size - 1)), LivePeer{});
    if (fd_ < 0) {
        if (error_.empty()) error_ = "liveness: not listening";
        return false;
    }
    struct Pending {
        int fd;
        std::string line;
    };
    std::vector<Pending> pending;
    int have = 0;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    std::vector<pollfd> pf;
    while (have < size - 1) {
        const int left = ms_left(deadline);
        if (left == 0) {
            std::string missing;
            for (const LivePeer& p : peers)
                if (p.fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(&p - peers.data() + 1);
            error_ = "liveness: rank(s) " + missing + " did not connect to port " + std::to_string(port_) + " within " +
                std::to_string(int(timeout_s)) + " s";
            break;
        }
        pf.assign(1, pollfd{fd_, POLLIN, 0});
        for (const Pending& p : pending) pf.push_back({p.fd, POLLIN, 0});
        if (poll(pf.data(), nfds_t(pf.size()), left) < 0 && errno != EINTR) {
            error_ = os_error("liveness: poll");
            break;
        }
        for (size_t i = pf.size(); i-- > 1;) {   // backwards: a finished one is erased
            if (!pf[i].revents) continue;
            Pending& p = pending[i - 1];
            char buf[256];
            const ssize_t n = recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            bool keep = n > 0;
            if (keep) p.line.append(buf, size_t(n));
            if (keep && p.line.find('\n') != std::string::npos) {
                // hello <token> <rank> <pid> <host>
                std::istringstream in(p.line);
                std::string word, token, host;
                int rank = -1;
                long pid = 0;
                in >> word >> token >> rank >> pid >> host;
                keep = false;
                if (word == "hello" && token == token_ && rank >= 1 && rank < size && peers[size_t(rank - 1)].fd < 0 &&
                    send_all(p.fd, "ok\n", deadline)) {
                    peers[size_t(rank - 1)] = {rank, p.fd, "pid " + std::to_string(pid) + " on " + host};
                    ++have;
                    pending.erase(pending.begin() + std::ptrdiff_t(i - 1));
                    continue;
                }
            }
            if (!keep || p.line.size() > 512) {   // closed, broken, not a rank of this job, or garbage
                close(p.fd);
                pending.erase(pending.begin() + std::ptrdiff_t(i - 1));
            }
        }
        if (pf[0].revents)
            for (int c; (c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;)
                pending.push_back({c, {}});
    }
    for (const Pending& p : pending) close(p.fd);
    close(fd_);   // the job is set up (or failed): nobody else may connect
    fd_ = -1;
    if (have == size - 1) return true;
    for (LivePeer& p : peers)
        if (p.fd >= 0) close(p.fd), p.fd = -1;
    return false;
}

// ---- the other ranks: connecting ----

LivePeer connect_to_leader(const std::string& advert, int rank, double timeout_s, std::string& error) {
    const std::vector<std::string> lines = split_lines(advert);
    if (lines.size() < 5 || lines[0] != kMagic) {
        error = "liveness: rank 0 sent an advert this build does not understand";
        return {};
    }
    const std::string& token = lines[1];
    const std::string& port = lines[2];
    const std::string& host = lines[3];
    const std::string hello =
        "hello " + token + " " + std::to_string(rank) + " " + std::to_string(getpid()) + " " + host_name() + "\n";
    std::vector<std::string> tried;
    std::vector<sockaddr_storage> seen;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    auto attempt = [&](const sockaddr* a, socklen_t len, const std::string& label) -> int {
        sockaddr_storage key{};
        std::memcpy(&key, a, len);
        for (const sockaddr_storage& s : seen)
            if (std::memcmp(&s, &key, sizeof key) == 0) return -1;
        seen.push_back(key);
        if (ms_left(deadline) == 0) return -1;
        // connecting to one address takes at most 3 s, so an unreachable one leaves time for the next
        const auto connect_by = std::min(deadline, Clock::now() + std::chrono::seconds(3));
        std::string e;
        const int fd = try_connect(a, len, hello, connect_by, deadline, e);
        if (fd < 0) tried.push_back(label + " (" + e + ")");
        return fd;
    };
    auto attempt_numeric = [&](const std::string& ip) -> int {
        addrinfo hints{}, *res = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
        if (getaddrinfo(ip.c_str(), port.c_str(), &hints, &res) != 0 || !res) return -1;
        const int fd = attempt(res->ai_addr, res->ai_addrlen, ip);
        freeaddrinfo(res);
        return fd;
    };
    int fd = -1;
    if (host == host_name())
        for (const char* lo : {"127.0.0.1", "::1"})
            if (fd < 0) fd = attempt_numeric(lo);
    if (fd < 0) {
        addrinfo hints{}, *res = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) == 0) {
            for (addrinfo* r = res; r && fd < 0; r = r->ai_next) {
                char ip[INET6_ADDRSTRLEN] = "?";
                const void* where = r->ai_family == AF_INET6
                    ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(r->ai_addr)->sin6_addr)
                    : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(r->ai_addr)->sin_addr);
                inet_ntop(r->ai_family, where, ip, sizeof ip);
                fd = attempt(r->ai_addr, r->ai_addrlen, host + "=" + ip);
            }
            freeaddrinfo(res);
        }
    }
    for (size_t i = 5; i < lines.size() && fd < 0; ++i) fd = attempt_numeric(lines[i]);
    if (fd < 0) {
        error = "liveness: cannot reach rank 0 (" + host + ", port " + port + ")";
        for (const std::string& t : tried) error += "; " + t;
        return {};
    }
    return {0, fd, "pid " + lines[4] + " on " + host};
}

// ---- the watcher ----

LivenessWatcher::LivenessWatcher(int rank, int size, std::vector<LivePeer> peers, LivenessConfig cfg,
                                 std::function<void(const std::string&)> on_lost)
    : rank_(rank), size_(size), cfg_(cfg), on_lost_(std::move(on_lost)) {
    const auto now = Clock::now();
    for (LivePeer& p : peers) watched_.push_back({std::move(p), true, false, false, now, {}});
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    // The thread takes no signal: they stay with the threads that handle them.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_ = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

LivenessWatcher::~LivenessWatcher() { stop(); }

std::string LivenessWatcher::reason() const {
    std::lock_guard<std::mutex> lk(mu_);
    return reason_;
}

std::string LivenessWatcher::leaving_peer() const {
    std::lock_guard<std::mutex> lk(mu_);
    return leaving_peer_;
}

std::string LivenessWatcher::describe(const LivePeer& p) const {
    return "MPI rank " + std::to_string(p.rank) + " of " + std::to_string(size_) +
        (p.who.empty() ? "" : " (" + p.who + ")");
}

void LivenessWatcher::say_leaving() {
    leaving_.store(true, std::memory_order_release);
    for (const Watched& w : watched_)
        if (w.peer.fd >= 0) (void)!send(w.peer.fd, "L", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void LivenessWatcher::tell_lost(const std::string& reason) {
    std::string msg = "X" + reason.substr(0, 2000) + "\n";
    std::replace(msg.begin() + 1, msg.end() - 1, '\n', ' ');
    const auto deadline = Clock::now() + std::chrono::milliseconds(100);
    for (const Watched& w : watched_)
        if (w.open && w.peer.fd >= 0) send_all(w.peer.fd, msg, deadline);
}

void LivenessWatcher::stop() {
    if (thread_.joinable()) {
        stop_.store(true, std::memory_order_release);
        if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
        thread_.join();
    }
    for (Watched& w : watched_)
        if (w.peer.fd >= 0) close(w.peer.fd), w.peer.fd = -1;
    for (int& f : wake_)
        if (f >= 0) close(f), f = -1;
}

void LivenessWatcher::lose(const std::string& reason) {
    if (leaving_.load(std::memory_order_acquire)) return;   // this rank is on its way out: nothing to report
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (lost_.load(std::memory_order_relaxed)) return;
        reason_ = reason;
        lost_.store(true, std::memory_order_release);
    }
    if (rank_ == 0) tell_lost(reason);
    if (on_lost_) on_lost_(reason);
}

void LivenessWatcher::read_from(Watched& w) {
    char buf[256];
    for (;;) {
        const ssize_t n = recv(w.peer.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            w.last_heard = Clock::now();
            for (ssize_t i = 0; i < n; ++i) {
                const char c = buf[i];
                if (w.in_report) {
                    if (c != '\n') {
                        if (w.report.size() < 4096) w.report += c;
                        continue;
                    }
                    w.in_report = false;
                    lose(describe(w.peer) + " reports: " + w.report);
                } else if (c == 'X') {
                    w.in_report = true;
                } else if (c == 'L' && !w.leaving) {
                    w.leaving = true;
                    std::lock_guard<std::mutex> lk(mu_);
                    if (leaving_peer_.empty()) leaving_peer_ = describe(w.peer);
                    int64_t none = 0;
                    leaving_since_ns_.compare_exchange_strong(none, int64_t(w.last_heard.time_since_epoch().count()));
                }
            }
            if (size_t(n) < sizeof buf) return;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        const std::string how = n == 0 ? "its connection closed: the process exited, crashed or was killed"
                                       : std::string("its connection broke: ") + std::strerror(errno);
        w.open = false;
        if (!w.leaving) lose(describe(w.peer) + " is gone (" + how + ")");
        return;
    }
}

void LivenessWatcher::run() {
    const bool leader = rank_ == 0;
    const auto beat = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg_.heartbeat_s));
    const auto silence = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg_.silence_s));
    auto next_beat = Clock::now();
    std::vector<pollfd> pf;
    std::vector<Watched*> who;
    while (!stop_.load(std::memory_order_acquire)) {
        pf.assign(1, pollfd{wake_[0], POLLIN, 0});
        who.assign(1, nullptr);
        for (Watched& w : watched_)
            if (w.open) pf.push_back({w.peer.fd, POLLIN, 0}), who.push_back(&w);
        int timeout = -1;
        if (!leader)
            timeout = std::max(
                0, int(std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - Clock::now()).count()));
        else if (cfg_.silence_s > 0)
            timeout = int(cfg_.heartbeat_s * 1000);
        if (poll(pf.data(), nfds_t(pf.size()), timeout) < 0 && errno != EINTR) break;
        if (stop_.load(std::memory_order_acquire)) break;
        for (size_t i = 1; i < pf.size(); ++i)
            if (pf[i].revents) read_from(*who[i]);
        const auto now = Clock::now();
        if (!leader && now >= next_beat) {
            for (Watched& w : watched_)
                if (w.open) (void)!send(w.peer.fd, "H", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            next_beat = now + beat;
        }
        if (leader && cfg_.silence_s > 0)
            for (Watched& w : watched_)
                if (w.open && !w.leaving && now - w.last_heard > silence) {
                    char s[32];
                    std::snprintf(s, sizeof s, "%.1f", std::chrono::duration<double>(now - w.last_heard).count());
                    lose(describe(w.peer) + " has not been heard from for " + s +
                         " s (stopped — SIGSTOP, a debugger — or its host hangs; KIMI_DIST_PEER_TIMEOUT=<seconds> sets "
                         "this limit, 0 waits forever)");
                }
    }
}

}   // namespace kimi::dist
