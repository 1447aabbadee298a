// RequestStream and StreamNotifier implementation (see request_stream.h).
#include "runtime/request_stream.h"

namespace kimi {

void StreamNotifier::notify() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        ++seq_;
    }
    cv_.notify_all();
}

void StreamNotifier::wait_for(uint64_t& seen, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return seq_ != seen; });
    seen = seq_;
}

bool RequestStream::try_next(TokenEvent& out) {
    std::lock_guard<std::mutex> lk(mu_);
    if (read_ >= events_.size()) return false;
    out = std::move(events_[read_++]);
    return true;
}

bool RequestStream::next(TokenEvent& out) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return read_ < events_.size() || closed_; });
    if (read_ >= events_.size()) return false;
    out = std::move(events_[read_++]);
    return true;
}

void RequestStream::push(TokenEvent&& e) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        const bool last = e.finish != FinishReason::kNone;
        events_.push_back(std::move(e));
        if (last) closed_ = true;
    }
    cv_.notify_all();
    if (notifier_) notifier_->notify();
}

}   // namespace kimi
