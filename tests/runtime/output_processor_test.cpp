// OutputProcessor on its own (no model): check_stop's order of stop conditions, and
// postprocess() appending a greedy token, publishing its event and finishing the request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#include "cache/cache_manager.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"
#include "runtime/token_draw.h"

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

// Speculative verification: a request with a draft owns 1 + draft rows; each is sampled as
// plain decoding would, and the request moves on while the token equals the draft's.
TEST(OutputProcessor, DraftRowsAreVerifiedInOrder) {
    CacheManager cache(16, 4, 4, 4);
    Scheduler sched(SchedulerConfig{4, 64}, cache);
    OutputProcessor out(kVocab, kVocab, kEos, 64);
    LiveRequests live;
    auto a = live_request(1, 3, 20), b = live_request(2, 3, 20), c = live_request(3, 3, 20), d = live_request(4, 3, 20);
    a->req.draft = {5, 6, 7};   // rows 0-3: 5, 6, 3, 4 → two accepted, then the target's 3
    b->req.draft = {};          // row 4: a plain decode
    c->req.draft = {4, 4};      // rows 5-7: 4, 4, 6 → all accepted, and the bonus 6
    d->req.draft = {1, 5};      // rows 8-10: 1, EOS → ends inside the draft
    const std::vector<int32_t> argmax = {5, 6, 3, 4, 7, 4, 4, 6, 1, kEos, 5};
    std::vector<Request*> rows = {&a->req, &a->req, &a->req, &a->req, &b->req, &c->req,
                                  &c->req, &c->req, &d->req, &d->req, &d->req};
    for (auto* l : {&a, &b, &c, &d}) {
        sched.add(&(*l)->req);
        const uint64_t id = (*l)->req.id;
        live.emplace(id, std::move(*l));
    }
    std::vector<float> logits(argmax.size() * kVocab, 0.0f);
    for (size_t i = 0; i < argmax.size(); ++i) logits[i * kVocab + size_t(argmax[i])] = 1.0f;
    std::vector<DraftVerdict> verdicts;
    out.postprocess(Tensor(logits.data(), DType::kF32, {int64_t(argmax.size()), kVocab}), rows, live, sched, &verdicts);

    EXPECT_EQ(live.at(1)->req.output, (std::vector<int32_t>{5, 6, 3}));
    EXPECT_EQ(live.at(2)->req.output, (std::vector<int32_t>{7}));
    EXPECT_EQ(live.at(3)->req.output, (std::vector<int32_t>{4, 4, 6}));
    EXPECT_EQ(live.count(4), 0u) << "EOS inside the draft ends the request";
    ASSERT_EQ(verdicts.size(), 2u);
    EXPECT_EQ(verdicts[0].req->id, 1u);
    EXPECT_EQ(verdicts[0].n_draft, 3);
    EXPECT_EQ(verdicts[0].accepted, 2);
    EXPECT_EQ(verdicts[1].req->id, 3u);
    EXPECT_EQ(verdicts[1].accepted, 2);
    TokenEvent e;
    for (int32_t t : {5, 6, 3}) {   // one event per token, in order
        ASSERT_TRUE(live.at(1)->stream->try_next(e));
        EXPECT_EQ(e.token, t);
    }
}

// n seeded requests (temperature 1, top_k) verify one draft token each against `row` (also the
// row after it): the counts of their first tokens and how many accepted, each first token
// checked against the plain draw of the same seed. draft(request): the draft token.
struct Draws {
    std::vector<int64_t> count = std::vector<int64_t>(kVocab, 0);
    int64_t accepted = 0;
};
Draws verify_many(const std::vector<float>& row, int32_t top_k, int32_t n, uint64_t seed0,
                  const std::function<int32_t(const Request&)>& draft) {
    std::vector<float> logits(row);
    logits.insert(logits.end(), row.begin(), row.end());   // the row after the draft token
    CacheManager cache(16, 4, 4, 4);
    Scheduler sched(SchedulerConfig{4, 64}, cache);
    OutputProcessor out(kVocab, kVocab, kEos, 64);
    TokenDraw plain(kVocab, kEos);
    SampledToken tok;
    std::vector<DraftVerdict> verdicts;
    Draws d;
    for (int32_t i = 0; i < n; ++i) {
        LiveRequests live;
        auto l = live_request(uint64_t(i + 1), 3, 8);
        l->req.params.temperature = 1.0f;
        l->req.params.top_k = top_k;
        l->req.params.ignore_eos = true;
        l->req.seed = seed0 + uint64_t(i);
        EXPECT_TRUE(plain.draw(row, l->req, l->req.output, nullptr, tok));
        const int32_t token = draft(l->req);
        l->req.draft = {token};
        Request* r = &l->req;
        sched.add(r);
        live.emplace(r->id, std::move(l));
        const std::vector<Request*> rows = {r, r};
        out.postprocess(Tensor(logits.data(), DType::kF32, {2, kVocab}), rows, live, sched, &verdicts);
        ++d.count[size_t(r->output[0])];
        EXPECT_EQ(r->output[0], tok.token) << "the first token is the plain draw of the seed, seed " << r->seed;
        EXPECT_EQ(verdicts.size(), 1u);
        const int32_t a = verdicts.empty() ? 0 : verdicts[0].accepted;
        d.accepted += a;
        EXPECT_EQ(a, r->output[0] == token ? 1 : 0) << "kept exactly when the first token is the draft's";
        EXPECT_EQ(r->output.size(), size_t(1 + a)) << "a rejection ends the request's rows";
        sched.finish(r, FinishReason::kAbort);
    }
    return d;
}

// Chi-square of the counts against n draws of p; a token with p = 0 must never be drawn.
double chi_square(const Draws& d, const std::vector<double>& p, int32_t n) {
    double chi2 = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
        if (p[size_t(v)] == 0) {
            EXPECT_EQ(d.count[size_t(v)], 0) << "token " << v << " is outside the target's top-k";
            continue;
        }
        const double e = double(n) * p[size_t(v)];
        chi2 += (double(d.count[size_t(v)]) - e) * (double(d.count[size_t(v)]) - e) / e;
    }
    return chi2;
}

// softmax(row) over its top_k largest entries (0: all), renormalised.
std::vector<double> softmax_top_k(const std::vector<float>& row, int32_t top_k) {
    std::vector<int32_t> ids(kVocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
    const int64_t kept = top_k > 0 ? top_k : kVocab;
    std::vector<double> p(kVocab, 0.0);
    double z = 0;
    for (int64_t j = 0; j < kept; ++j) z += std::exp(double(row[size_t(ids[size_t(j)])]));
    for (int64_t j = 0; j < kept; ++j) p[size_t(ids[size_t(j)])] = std::exp(double(row[size_t(ids[size_t(j)])])) / z;
    return p;
}

const std::vector<float> kRow = {0.5f, -1.0f, 1.5f, 0.0f, 2.0f, -0.5f, 1.0f, 0.25f};

// An n-gram draft (a point mass at d): seeded requests (temperature 1) take their first token
// with the frequencies of the target distribution (chi-square, 7 degrees of freedom, below
// 24.3: p = 0.001), each the plain draw of its seed, and accept d with probability p(d).
TEST(OutputProcessor, VerifiedSamplingDrawsTheTargetDistribution) {
    const std::vector<double> p = softmax_top_k(kRow, 0);
    const int32_t d = 2, n = 20000;
    const Draws got = verify_many(kRow, 0, n, 1000, [](const Request&) { return 2; });
    EXPECT_LT(chi_square(got, p, n), 24.3) << "chi-square of the first tokens against the target distribution";
    const double sd = std::sqrt(double(n) * p[d] * (1 - p[d]));
    EXPECT_NEAR(double(got.accepted), double(n) * p[d], 4 * sd) << "acceptance is p(d)";
}

// A draft model's proposal (docs/runtime.md#draft-model): drawn from the draft's logits by the
// target's own rule and uniform for that index (TokenDraw), so the first token is always the
// target's plain draw (its distribution p: chi-square below 24.3, or 16.3 with top-k 4), and
// the draft is accepted exactly when the two draws coincide: with no filter both invert their
// distribution function at the same uniform in id order, so the acceptance rate is the overlap
// of the two sets of intervals, Σ_i |[P(i−1), P(i)) ∩ [Q(i−1), Q(i))| (at most Σ min(p, q));
// with q = p, every draft is accepted.
TEST(OutputProcessor, DraftModelProposalsAreTheTargetsDrawWhereTheyAgree) {
    const std::vector<float> draft_row = {1.5f, 0.0f, 0.5f, 1.0f, -1.0f, 2.0f, 0.0f, -0.5f};
    const std::vector<double> q = softmax_top_k(draft_row, 0);
    for (const int32_t top_k : {0, 4}) {
        const std::vector<double> p = softmax_top_k(kRow, top_k);
        TokenDraw draft_draw(kVocab, kEos);
        SampledToken tok;
        const auto from = [&](const std::vector<float>& logits) {
            return [&, logits](const Request& r) {
                EXPECT_TRUE(draft_draw.draw(logits, r, r.output, nullptr, tok));
                return tok.token;
            };
        };
        const int32_t n = 20000;
        const Draws got = verify_many(kRow, top_k, n, 7000, from(draft_row));
        EXPECT_LT(chi_square(got, p, n), top_k > 0 ? 16.3 : 24.3) << "chi-square of the first tokens, top_k " << top_k;
        double coupled = 0, overlap = 0, P = 0, Q = 0;
        for (int64_t v = 0; v < kVocab; ++v) {
            overlap += std::min(p[size_t(v)], q[size_t(v)]);
            coupled += std::max(0.0, std::min(P + p[size_t(v)], Q + q[size_t(v)]) - std::max(P, Q));
            P += p[size_t(v)];
            Q += q[size_t(v)];
        }
        const double sd = std::sqrt(double(n) * overlap * (1 - overlap));
        EXPECT_LT(double(got.accepted), double(n) * overlap + 4 * sd) << "acceptance is at most sum min(p, q)";
        if (top_k == 0) {
            EXPECT_NEAR(double(got.accepted), double(n) * coupled, 4 * sd) << "acceptance is the intervals' overlap";
        }
        const Draws same = verify_many(kRow, top_k, 2000, 9000, from(kRow));
        EXPECT_EQ(same.accepted, 2000) << "q = p: every proposal is the target's draw, top_k " << top_k;
    }
}

}   // namespace
}   // namespace kimi
