// OutputProcessor on its own (no model): check_stop's order of stop conditions, and
// postprocess() appending a greedy token, publishing its event and finishing the request.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cache/cache_manager.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"

namespace kimi {
namespace {

constexpr int64_t kVocab = 8;
constexpr int32_t kEos = 2;

std::unique_ptr<LiveRequest> live_request(uint64_t id, int32_t prompt_len, int32_t max_tokens) {
    auto l = std::make_unique<LiveRequest>();
    l->req.id = id;
    l->req.prompt.assign(size_t(prompt_len), 1);
    l->req.params.max_tokens = max_tokens;
    l->req.params.temperature = 0.0f;
    l->stream = std::make_shared<RequestStream>();
    return l;
}

TEST(OutputProcessor, CheckStopOrder) {
    const OutputProcessor out(kVocab, kVocab, kEos, 8);
    auto l = live_request(1, 3, 4);
    TokenEvent e;
    l->req.output = {5};
    EXPECT_EQ(out.check_stop(*l, 5, e), FinishReason::kNone);
    l->req.output = {kEos};
    EXPECT_EQ(out.check_stop(*l, kEos, e), FinishReason::kStop);
    l->req.params.ignore_eos = true;
    EXPECT_EQ(out.check_stop(*l, kEos, e), FinishReason::kNone);
    l->req.params.stop_token_ids = {6};
    l->req.output = {6};
    EXPECT_EQ(out.check_stop(*l, 6, e), FinishReason::kStop);
    l->req.output = {5, 5, 5, 5};   // max_tokens
    EXPECT_EQ(out.check_stop(*l, 5, e), FinishReason::kLength);
    l->req.params.max_tokens = 100;
    l->req.output = {5, 5, 5, 5, 5};   // 3 + 5 = max-model-len 8
    EXPECT_EQ(out.check_stop(*l, 5, e), FinishReason::kLength);
    l->req.output = {5, 5, 5, 5};
    EXPECT_EQ(out.check_stop(*l, 5, e), FinishReason::kNone);
    EXPECT_EQ(e.stop_index, -1);
}

TEST(OutputProcessor, PostprocessAppendsPublishesAndFinishes) {
    CacheManager cache(16, 4, 2, 4);
    Scheduler sched(SchedulerConfig{2, 64}, cache);
    OutputProcessor out(kVocab, kVocab, kEos, 16);
    LiveRequests live;
    auto a = live_request(1, 3, 4), b = live_request(2, 3, 4);
    std::shared_ptr<RequestStream> sa = a->stream, sb = b->stream;
    std::vector<Request*> rows = {&a->req, &b->req};
    sched.add(&a->req);
    sched.add(&b->req);
    live.emplace(1, std::move(a));
    live.emplace(2, std::move(b));
    std::vector<float> logits(2 * kVocab, 0.0f);
    logits[5] = 1.0f;               // row 0: token 5, goes on
    logits[kVocab + kEos] = 1.0f;   // row 1: EOS, stops
    out.postprocess(Tensor(logits.data(), DType::kF32, {2, kVocab}), rows, live, sched);

    ASSERT_EQ(live.size(), 1u);
    EXPECT_EQ(live.at(1)->req.output, std::vector<int32_t>{5});
    TokenEvent e;
    ASSERT_TRUE(sa->try_next(e));
    EXPECT_EQ(e.token, 5);
    EXPECT_EQ(e.finish, FinishReason::kNone);
    ASSERT_TRUE(sb->try_next(e));
    EXPECT_EQ(e.token, kEos);
    EXPECT_EQ(e.finish, FinishReason::kStop);
    EXPECT_FALSE(sb->next(e));   // closed
    EXPECT_EQ(sched.n_waiting(), 1);
}

}   // namespace
}   // namespace kimi
