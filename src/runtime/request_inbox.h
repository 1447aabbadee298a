// RequestInbox: what other threads hand the engine between its steps — submitted requests,
// cancels (by id, or a flag on a stream), stop, and the reason the engine failed for good —
// under one mutex, with the condition variable the engine's background loop sleeps on. The
// engine's thread takes it all at the start of a step (take()).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/live_request.h"

namespace kimi {

class Scheduler;

class RequestInbox {
public:
    // A group id: groups and request ids share one counter, so a group never equals another
    // request's id.
    uint64_t new_group();
    // All of them queued, or none (std::bad_alloc); each gets its id, its group (0: a group of
    // its own) and, without a seed in its parameters, a seed derived from its id.
    void enqueue(std::span<std::unique_ptr<LiveRequest>> lives, uint64_t group);
    void cancel(uint64_t id);
    // Flags the stream; allocates nothing and never throws (error paths, destructors).
    void cancel(RequestStream& stream) noexcept;

    // The engine's thread, at the start of a step: the queued requests into `live` and the
    // scheduler, and the cancelled ones (by id or flagged stream) marked abort_requested.
    void take(LiveRequests& live, Scheduler& sched);
    // Every queued request ends with `why`; the cancels are dropped. Allocates nothing.
    void fail_queued(const std::shared_ptr<const std::string>& why);

    // The background loop: blocks until there is something to take, has_work() holds (read
    // under the inbox's mutex, woken by any hand-off) or stop() was called. false: stopped.
    template <class HasWork>
    bool wait_for_work(HasWork has_work) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !queued_.empty() || !cancels_.empty() || cancel_flagged_ || has_work(); });
        return !stop_;
    }
    void start();   // wait_for_work blocks again (after a stop())
    void stop();    // wakes every wait_for_work, which returns false from now on

    void set_failure(const char* why);   // may throw std::bad_alloc
    std::string failure() const;         // empty while the engine is healthy

private:
    mutable std::mutex mu_;   // guards everything below
    std::condition_variable cv_;
    std::vector<std::unique_ptr<LiveRequest>> queued_;
    std::vector<uint64_t> cancels_;
    bool cancel_flagged_ = false;   // cancel(RequestStream&) flagged a stream since the last take()
    uint64_t next_id_ = 1;
    bool stop_ = false;
    std::string failure_;
};

}   // namespace kimi
