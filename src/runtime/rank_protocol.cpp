// The rank protocol's messages and RankGroup (see rank_protocol.h).
#include "runtime/rank_protocol.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/model_runner.h"

namespace kimi {

void begin_rank_message(std::vector<int32_t>& msg, RankMessage kind, int32_t runner) {
    msg.clear();
    msg.push_back(int32_t(kind));
    msg.push_back(runner);
}

void send_rank_message(dist::Comm& comm, std::vector<int32_t>& msg) {
    int64_t n = int64_t(msg.size());
    comm.broadcast(&n, sizeof n);
    comm.broadcast(msg.data(), n * int64_t(sizeof(int32_t)));
}

RankGroup& RankGroup::process() {
    static RankGroup group;
    return group;
}

int32_t RankGroup::lead() { return n_led_++; }

int32_t RankGroup::join(ModelRunner& runner, Exec& ex) {
    const int32_t index = n_joined_++;
    joined_.push_back({index, &runner, &ex});
    return index;
}

void RankGroup::follow_all(dist::Comm& comm) {
    while (!joined_.empty()) {
        int64_t n = 0;
        comm.broadcast(&n, sizeof n);
        msg_.resize(size_t(n));
        comm.broadcast(msg_.data(), n * int64_t(sizeof(int32_t)));
        KIMI_CHECK(n >= kRankMessageHeader + 1, "a malformed step message");
        auto it = std::find_if(joined_.begin(), joined_.end(), [&](const Joined& j) { return j.index == msg_[1]; });
        KIMI_CHECK(it != joined_.end(), "a step message for an unknown engine");
        if (RankMessage(msg_[0]) == RankMessage::kStop)
            joined_.erase(it);
        else
            it->runner->run_message(msg_.data() + kRankMessageHeader, *it->ex);
    }
}

}   // namespace kimi
