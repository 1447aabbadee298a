// The bounded response store (see response_store.h).
#include "server/response_store.h"

namespace kimi::server {

ResponseStore::ResponseStore(int64_t capacity, double ttl_s, int64_t max_bytes)
    : capacity_(capacity), ttl_(ttl_s), max_bytes_(max_bytes) {}

void ResponseStore::evict(Clock::time_point now) {
    while (!order_.empty() &&
           (int64_t(order_.size()) > capacity_ || bytes_ > max_bytes_ || order_.front().expires <= now)) {
        bytes_ -= order_.front().bytes;
        by_id_.erase(order_.front().id);
        order_.pop_front();
    }
}

void ResponseStore::put(const std::string& id, StoredResponse r) {
    if (!enabled()) return;
    const int64_t bytes = int64_t(r.messages.dump().size() + r.response.dump().size() + id.size());
    const Clock::time_point now = Clock::now();
    std::lock_guard lock(mu_);
    if (auto it = by_id_.find(id); it != by_id_.end()) {
        bytes_ -= it->second->bytes;
        order_.erase(it->second);
        by_id_.erase(it);
    }
    order_.push_back({id, std::move(r), bytes, now + std::chrono::duration_cast<Clock::duration>(ttl_)});
    by_id_[id] = std::prev(order_.end());
    bytes_ += bytes;
    evict(now);
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
    std::lock_guard lock(mu_);
    evict(Clock::now());
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second->r;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return false;
    bytes_ -= it->second->bytes;
    order_.erase(it->second);
    by_id_.erase(it);
    return true;
}

int64_t ResponseStore::size() {
    std::lock_guard lock(mu_);
    evict(Clock::now());
    return int64_t(order_.size());
}

}   // namespace kimi::server
