// HttpListener: the server's sockets — accepts TCP connections and serves HTTP/1.1 on each
// (a thread per connection, at most max_connections; past that, 503 and close), with
// deadlines no client can stretch: a request's head and body must arrive within
// request_timeout_s of its first byte (else 408), an idle keep-alive connection closes after
// keep_alive_timeout_s, and every write gives up after request_timeout_s without progress.
// Pipelined requests are answered in order; a client that half-closes after its request
// still gets the answer. stop() stops accepting, closes idle connections at once, lets
// requests being handled finish for a grace period, then closes every socket: no client can
// hold it up. What a request means is the handler's business (http_server.cpp).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <memory>
#include <utility>
#include <vector>

#include "server/http_message.h"

namespace kimi::server {

// What a generation route learned about its request, for the access log (filled by the
// handler, or by its stream as the body goes out; -1: not a generation).
struct AccessInfo {
    int64_t prompt_tokens = -1, cached_tokens = 0, completion_tokens = 0;
    double ttft_s = -1.0;   // the first token, since the request arrived
    std::string error;      // a 5xx's cause
};

struct HttpResponse {
    int status = 200;
    std::shared_ptr<AccessInfo> access = std::make_shared<AccessInfo>();
    std::string content_type = "application/json";
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    // A streamed body (chunked): called once the head went out; `write` sends one piece and
    // returns false once the client is gone or too slow (then stop).
    std::function<void(const std::function<bool(std::string_view)>& write)> stream;
    bool close = false;   // close the connection after this response

    void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
    void set_content(std::string b, std::string type) {
        body = std::move(b);
        content_type = std::move(type);
    }
};

struct ListenerConfig {
    std::string host = "127.0.0.1";
    int port = 8000;   // 0: any free port
    int max_connections = 256;
    double request_timeout_s = 30.0;     // head + body after the first byte; each write
    double keep_alive_timeout_s = 5.0;   // idle between requests
    HttpLimits limits;
    // The body of the 503 a connection gets when memory runs out outside the handler (reading
    // the request, making the answer); empty: the error body of a 503. Made at start.
    std::string out_of_memory_body;
};

struct ListenerStats {
    int64_t open = 0, accepted = 0, refused = 0, timed_out = 0;
};

class HttpListener {
public:
    using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
    // The body of a response the listener makes itself (a refused or timed-out request).
    using ErrorBody = std::function<std::string(int status, const std::string& message)>;
    // Called after every response with its status (metrics).
    using OnResponse = std::function<void(int status)>;
    // Called once a request's response went out in full (or the client left): the access log.
    using OnDone = std::function<void(const HttpRequest& req, const HttpResponse& res, double seconds)>;

    HttpListener(ListenerConfig cfg, Handler handler, ErrorBody error_body, OnResponse on_response);
    ~HttpListener();

    void set_on_done(OnDone f) { on_done_ = std::move(f); }   // before start()
    int bind();                                               // throws kimi::Error; returns the port
    void start();                                             // the accept loop on a thread of its own
    // Stops accepting and closes idle connections; requests being handled may finish for
    // grace_s, then on_grace_over() runs (it should abort them) and, a moment later, every
    // socket is shut. Returns once every connection thread has ended. Idempotent.
    void stop(double grace_s, const std::function<void()>& on_grace_over);
    bool running() const { return running_.load(); }
    ListenerStats stats() const;

private:
    void accept_loop();
    void serve(int fd);   // one connection's thread: nothing escapes it
    void serve_requests(int fd);
    bool read_request(int fd, std::string& in, RequestParser& parser, bool first, bool& peer_done, HttpRequest& req);
    bool answer(int fd, HttpRequest& req, bool peer_done);   // false: the connection ends
    void refuse(int fd);
    static bool peer_closed(int fd);
    bool write_all(int fd, std::string_view data);
    bool send_response(int fd, const HttpRequest* req, HttpResponse& res);
    void send_error(int fd, int status, const std::string& message);

    ListenerConfig cfg_;
    Handler handler_;
    ErrorBody error_body_;
    OnResponse on_response_;
    OnDone on_done_;
    // Whole responses made at start, to be sent when nothing can be allocated: the 503 past
    // max_connections, and the 503 (memory ran out) or 500 of a connection that fails outside
    // its handler.
    std::string refused_response_, out_of_memory_response_, internal_error_response_;
    int listen_fd_ = -1;
    std::thread acceptor_;
    std::atomic<bool> running_{false}, stopping_{false}, force_close_{false}, stopped_{false};
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::set<int> fds_;     // open connections (under mu_)
    ListenerStats stats_;   // under mu_
};

}   // namespace kimi::server
