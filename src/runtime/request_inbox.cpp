// RequestInbox implementation (see request_inbox.h): queueing with ids and seeds, cancels,
// the hand-over to the engine's thread, failing the queued requests, stop and failure.
#include "runtime/request_inbox.h"

#include <algorithm>

#include "core/rng.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"

namespace kimi {

uint64_t RequestInbox::new_group() {
    std::lock_guard<std::mutex> lk(mu_);
    return next_id_++;
}

void RequestInbox::enqueue(std::span<std::unique_ptr<LiveRequest>> lives, uint64_t group) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        const size_t need = queued_.size() + lives.size();
        if (queued_.capacity() < need)
            queued_.reserve(std::max(need, 2 * queued_.capacity()));   // may throw: nothing queued
        for (std::unique_ptr<LiveRequest>& live : lives) {             // allocates nothing from here on
            live->req.id = next_id_++;
            live->req.group = group != 0 ? group : live->req.id;
            // A request without a seed gets one derived from its id: reproducible per process.
            live->req.seed =
                live->req.params.seed ? *live->req.params.seed : Rng(live->req.id * 0x9e3779b97f4a7c15ull).next();
            live->stream->id_ = live->req.id;
            queued_.push_back(std::move(live));
        }
    }
    cv_.notify_one();
}

void RequestInbox::cancel(uint64_t id) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        cancels_.push_back(id);
    }
    cv_.notify_one();
}

void RequestInbox::cancel(RequestStream& stream) noexcept {
    if (stream.cancel_requested_.exchange(true)) return;
    {
        std::lock_guard<std::mutex> lk(mu_);
        cancel_flagged_ = true;
    }
    cv_.notify_one();
}

void RequestInbox::take(LiveRequests& live, Scheduler& sched) {
    std::lock_guard<std::mutex> lk(mu_);
    // Room first: then an emplace that runs out of memory fails before it takes the request
    // (a rehash could drop it). What was moved before a failure is null here; fail_queued skips it.
    const size_t need = live.size() + queued_.size();
    if (!queued_.empty() && double(need) > double(live.bucket_count()) * double(live.max_load_factor()))
        live.reserve(need);
    for (auto& l : queued_) {
        if (!l) continue;
        Request* r = &l->req;
        const uint64_t id = r->id;
        live.emplace(id, std::move(l));
        sched.add(r);
    }
    queued_.clear();
    for (uint64_t id : cancels_) {
        auto it = live.find(id);
        if (it != live.end()) it->second->req.abort_requested = true;
    }
    cancels_.clear();
    if (cancel_flagged_) {   // only after a cancel(RequestStream&): no scan on an ordinary step
        cancel_flagged_ = false;
        for (auto& [id, l] : live)
            if (l->stream->cancel_requested_.load(std::memory_order_relaxed)) l->req.abort_requested = true;
    }
}

void RequestInbox::fail_queued(const std::shared_ptr<const std::string>& why) {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& l : queued_)
        if (l) OutputProcessor::fail(*l, why);   // null: taken before memory ran out (in the engine's live set)
    queued_.clear();
    cancels_.clear();
    cancel_flagged_ = false;
}

void RequestInbox::start() {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = false;
}

void RequestInbox::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
}

void RequestInbox::set_failure(const char* why) {
    std::lock_guard<std::mutex> lk(mu_);
    failure_ = why;
}

std::string RequestInbox::failure() const {
    std::lock_guard<std::mutex> lk(mu_);
    return failure_;
}

}   // namespace kimi
