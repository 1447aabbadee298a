// ImageBudget implementation (see image_budget.h).
#include "server/image_budget.h"

namespace kimi::server {

ImageBudget::Lease::~Lease() {
    if (!budget_) return;
    {
        std::lock_guard<std::mutex> lk(budget_->mu_);
        budget_->used_ -= bytes_;
    }
    budget_->freed_.notify_all();
}

ImageBudget::Lease ImageBudget::acquire(int64_t bytes, std::chrono::steady_clock::time_point deadline,
                                        const std::function<bool()>& stop, bool* waited) {
    std::unique_lock<std::mutex> lk(mu_);
    if (waited) *waited = used_ + bytes > total_;
    while (used_ + bytes > total_) {
        if (bytes > total_ || std::chrono::steady_clock::now() >= deadline || (stop && stop())) return {};
        freed_.wait_for(lk, std::chrono::milliseconds(20));
    }
    used_ += bytes;
    return Lease(this, bytes);
}

int64_t ImageBudget::in_use() const {
    std::lock_guard<std::mutex> lk(mu_);
    return used_;
}

}   // namespace kimi::server
