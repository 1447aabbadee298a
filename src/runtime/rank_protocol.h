// The rank protocol of a model split over MPI ranks (KimiModel::shard): rank 0's model runners
// lead — before each forward one broadcasts a message with the slot changes since the last one
// and the batch — and the runners of every other rank follow, running the same forward on
// their part of the model. A process may hold several engines (bench decode --ab, one after
// another in eval gsm8k --ab), so runners are numbered in the order they lead (rank 0) or join
// (the others), the order both sides build them, and each message names its runner.
// Message: int32 words [RankMessage, runner index, payload...], broadcast as its length (int64)
// then its words; a step's payload is ModelRunner's (model_runner.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/exec.h"
#include "dist/comm.h"

namespace kimi {

class ModelRunner;

enum class RankMessage : int32_t {
    kStep = 0,   // run one forward: the payload holds the slot ops and the batch
    kStop = 1,   // the leading runner is gone: stop following it
};

// Words before a message's payload: its kind and its runner's index.
inline constexpr int32_t kRankMessageHeader = 2;

// Starts a message (clears msg): its kind and runner index; the payload is appended after.
void begin_rank_message(std::vector<int32_t>& msg, RankMessage kind, int32_t runner);
// Rank 0: sends msg to every other rank.
void send_rank_message(dist::Comm& comm, std::vector<int32_t>& msg);

// The model runners of this process on a split model. There is one group per process (process()),
// because the engines on every rank are built independently, each numbered over the life of
// the process, and one follow() on a following rank serves all of them.
class RankGroup {
public:
    static RankGroup& process();

    int32_t lead();                                // rank 0: the index of a runner that starts leading
    int32_t join(ModelRunner& runner, Exec& ex);   // other ranks: the index of a runner that follows
    // Other ranks: receives rank 0's messages and runs each on its runner, until every joined
    // runner is stopped.
    void follow_all(dist::Comm& comm);

private:
    struct Joined {
        int32_t index;
        ModelRunner* runner;
        Exec* ex;
    };
    int32_t n_led_ = 0, n_joined_ = 0;   // runners numbered so far
    std::vector<Joined> joined_;         // joined and not yet stopped
    std::vector<int32_t> msg_;           // the message being received
};

}   // namespace kimi
