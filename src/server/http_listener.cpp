// HttpListener implementation (see http_listener.h): POSIX sockets, poll() in short slices
// so that every wait also sees stop() and its own deadline.
#include "server/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace kimi::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSliceMs = 100;   // how often a waiting connection looks at stop()

Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int ms_until(Clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
    return ms <= 0 ? 0 : int(std::min<int64_t>(ms, kSliceMs));
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

// A whole response with a JSON body that ends the connection.
std::string closing_response(int status, const std::string& body, const char* extra_headers = "") {
    return status_line(status) + "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n" + extra_headers + "Connection: close\r\n\r\n" + body;
}

std::string chunk(std::string_view data) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string out = size;
    out.append(data);
    out += "\r\n";
    return out;
}

}   // namespace

HttpListener::HttpListener(ListenerConfig cfg, Handler handler, ErrorBody error_body, OnResponse on_response)
    : cfg_(std::move(cfg)),
      handler_(std::move(handler)),
      error_body_(std::move(error_body)),
      on_response_(std::move(on_response)) {
    refused_response_ =
        closing_response(503,
                         error_body_(503,
                                     "too many connections (the server's limit is " +
                                         std::to_string(cfg_.max_connections) + ", --max-connections); retry shortly"),
                         "Retry-After: 1\r\n");
    out_of_memory_response_ = closing_response(
        503,
        cfg_.out_of_memory_body.empty() ? error_body_(503, "the server ran out of memory") : cfg_.out_of_memory_body);
    internal_error_response_ = closing_response(500, error_body_(500, "internal error"));
}

HttpListener::~HttpListener() {
    stop(0.0, [] {});
    if (listen_fd_ >= 0) ::close(listen_fd_);
}

int HttpListener::bind() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(cfg_.port);
    const std::string where = cfg_.host + ":" + port;
    if (getaddrinfo(cfg_.host.c_str(), port.c_str(), &hints, &found) != 0 || !found)
        throw Error("cannot listen on " + where + " (not an address of this machine)");
    int fd = -1;
    std::string why;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
            why = std::strerror(errno);
            ::close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0) throw Error("cannot listen on " + where + " (" + (why.empty() ? "no usable address" : why) + ")");
    set_nonblocking(fd);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    listen_fd_ = fd;
    return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

void HttpListener::start() {
    KIMI_CHECK(listen_fd_ >= 0, "HttpListener::start before bind");
    running_ = true;
    acceptor_ = std::thread([this] { accept_loop(); });
}

ListenerStats HttpListener::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    ListenerStats s = stats_;
    s.open = int64_t(fds_.size());
    return s;
}

void HttpListener::accept_loop() {
    while (!stopping_) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, kSliceMs) <= 0) continue;
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));   // out of descriptors: the backlog waits
            continue;
        }
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        bool admitted = false;
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (int(fds_.size()) < cfg_.max_connections) {
                try {
                    fds_.insert(fd);
                    admitted = true;
                    ++stats_.accepted;
                } catch (const std::bad_alloc&) {   // out of memory: refused below
                }
            }
            if (!admitted) ++stats_.refused;
        }
        if (!admitted) {
            refuse(fd);
            continue;
        }
        try {
            std::thread([this, fd] { serve(fd); }).detach();
        } catch (const std::exception&) {   // no thread to be had (memory, a limit): refuse like a full server
            {
                std::lock_guard<std::mutex> lk(mu_);
                fds_.erase(fd);
                ++stats_.refused;
            }
            refuse(fd);
        }
    }
    running_ = false;
}

// Past max_connections: 503 at once (the socket's buffer takes it without waiting), then close.
// Allocates nothing (the response was made at start): it also refuses when memory ran out.
void HttpListener::refuse(int fd) {
    const std::string& msg = refused_response_;
    [[maybe_unused]] const ssize_t n = ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
    if (on_response_) on_response_(503);
}

bool HttpListener::write_all(int fd, std::string_view data) {
    auto deadline = after(cfg_.request_timeout_s);
    while (!data.empty()) {
        if (force_close_) return false;
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n > 0) {
            data.remove_prefix(size_t(n));
            deadline = after(cfg_.request_timeout_s);   // progress: the client reads
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
        if (Clock::now() >= deadline) return false;   // the client stopped reading
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, ms_until(deadline));
    }
    return true;
}

bool HttpListener::send_response(int fd, const HttpRequest* req, HttpResponse& res) {
    const bool head_only = req && req->method == "HEAD";
    const bool chunked = bool(res.stream) && !head_only && (!req || req->minor_version >= 1);
    std::string out = status_line(res.status);
    out += "Content-Type: " + res.content_type + "\r\n";
    for (const auto& [k, v] : res.headers) out += k + ": " + v + "\r\n";
    if (res.stream && !chunked && !head_only) res.close = true;   // HTTP/1.0: the body ends with the connection
    if (!res.stream)
        out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
    else if (chunked)
        out += "Transfer-Encoding: chunked\r\n";
    if (res.close) out += "Connection: close\r\n";
    out += "\r\n";
    if (!head_only && !res.stream) out += res.body;
    if (on_response_) on_response_(res.status);
    if (!write_all(fd, out)) return false;
    if (!res.stream || head_only) return true;
    bool ok = true;
    try {
        res.stream([&](std::string_view piece) {
            if (!ok) return false;
            if (piece.empty()) return true;
            ok = write_all(fd, chunked ? std::string_view(chunk(piece)) : piece);
            return ok;
        });
    } catch (...) {   // the stream answers its own errors; past the head, this one just ends the connection
        return false;
    }
    if (ok && chunked) ok = write_all(fd, "0\r\n\r\n");
    return ok;
}

void HttpListener::send_error(int fd, int status, const std::string& message) {
    HttpResponse res;
    res.status = status;
    res.body = error_body_(status, message);
    res.close = true;
    send_response(fd, nullptr, res);
}

// The thread of one connection. Anything thrown outside the handler (memory running out while
// a request is read or its answer made) ends this connection only, with a response made at
// start if none was begun (send_response catches what is thrown once its head went out).
void HttpListener::serve(int fd) {
    try {
        serve_requests(fd);
    } catch (const std::bad_alloc&) {
        write_all(fd, out_of_memory_response_);
        if (on_response_) on_response_(503);
    } catch (...) {
        write_all(fd, internal_error_response_);
        if (on_response_) on_response_(500);
    }
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    std::lock_guard<std::mutex> lk(mu_);
    fds_.erase(fd);
    cv_.notify_all();
}

// Whether the client closed (or reset) the connection: no wait, nothing read.
bool HttpListener::peer_closed(int fd) {
    pollfd p{fd, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// Reads the connection's next request into `req`; false when there is none to answer: the
// client closed or stayed quiet, the listener stops, or the request was refused with an error.
bool HttpListener::read_request(int fd, std::string& in, RequestParser& parser, bool first, bool& peer_done,
                                HttpRequest& req) {
    // Wait for a request: idle keep-alive time between requests (the whole request time
    // for a new connection's first), unless bytes of one are already here (pipelining).
    auto deadline = after(first ? cfg_.request_timeout_s : cfg_.keep_alive_timeout_s);
    bool started = !in.empty();
    if (started) deadline = after(cfg_.request_timeout_s);
    char buf[16384];
    for (;;) {
        const RequestParser::State st = parser.feed(in);
        if (st == RequestParser::State::kComplete) {
            req = parser.take();
            return true;
        }
        if (st == RequestParser::State::kError) {
            send_error(fd, parser.error().status, parser.error().message);
            return false;
        }
        if (st == RequestParser::State::kHeadDone) {
            if (parser.peek().expects_continue() && !write_all(fd, "HTTP/1.1 100 Continue\r\n\r\n")) return false;
            continue;
        }
        // More bytes are needed.
        if (peer_done || (stopping_ && !started) || force_close_) return false;
        if (Clock::now() >= deadline) {
            if (started) {
                {
                    std::lock_guard<std::mutex> lk(mu_);
                    ++stats_.timed_out;
                }
                send_error(fd, 408,
                           "the request did not arrive within " + std::to_string(int(cfg_.request_timeout_s)) +
                               " s (--request-timeout)");
            }
            return false;
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, ms_until(deadline)) <= 0) continue;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            if (!started) {
                started = true;
                deadline = after(cfg_.request_timeout_s);
            }
            in.append(buf, size_t(n));
        } else if (n == 0) {
            peer_done = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return false;
        }
    }
}

// Runs the handler on one request and sends its response; false when the connection ends after it.
bool HttpListener::answer(int fd, HttpRequest& req, bool peer_done) {
    HttpResponse res;
    const auto t_request = Clock::now();
    req.arrived_s = std::chrono::duration<double>(t_request.time_since_epoch()).count();
    // A client that half-closed after sending its request still waits for the answer; one
    // that closes while the request is handled has gone.
    if (!peer_done) req.client_gone = [this, fd] { return force_close_ || peer_closed(fd); };
    try {
        handler_(req, res);
    } catch (const std::bad_alloc&) {   // even its answer could not be made: serve() sends one made at start
        throw;
    } catch (...) {   // the handler answers its own errors; this is the last resort
        res = HttpResponse{};
        res.status = 500;
        res.body = error_body_(500, "internal error");
    }
    if (!req.keep_alive() || stopping_) res.close = true;
    const bool sent = send_response(fd, &req, res);
    if (on_done_) on_done_(req, res, std::chrono::duration<double>(Clock::now() - t_request).count());
    return sent && !res.close;
}

void HttpListener::serve_requests(int fd) {
    std::string in;
    RequestParser parser(cfg_.limits);
    bool peer_done = false;   // the client closed its sending side
    bool first = true;
    for (;;) {
        HttpRequest req;
        if (!read_request(fd, in, parser, first, peer_done, req)) break;
        first = false;
        if (!answer(fd, req, peer_done)) break;
    }
}

void HttpListener::stop(double grace_s, const std::function<void()>& on_grace_over) {
    if (stopped_.exchange(true)) return;
    stopping_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    std::unique_lock<std::mutex> lk(mu_);
    // Idle connections notice stopping_ within a slice; requests being handled get the grace period.
    if (!cv_.wait_for(lk, std::chrono::duration<double>(grace_s), [&] { return fds_.empty(); })) {
        lk.unlock();
        on_grace_over();
        lk.lock();
        if (!cv_.wait_for(lk, std::chrono::seconds(1), [&] { return fds_.empty(); })) {
            force_close_ = true;   // writes give up; reads and polls wake
            for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
        }
    }
    cv_.wait(lk, [&] { return fds_.empty(); });
}

}   // namespace kimi::server
