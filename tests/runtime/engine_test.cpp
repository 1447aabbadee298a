// Invariance through the runtime: a request's greedy tokens and logprobs, and its seeded
// samples, are bit-identical alone, alongside 15 others of different lengths arriving at
// different times, under a tiny token budget (heavy chunking), and after preemption.
#include <gtest/gtest.h>

#include <cstring>

#include "checkpoint_make/quantize_checkpoint.h"
#include "engine_test_util.h"
#include "runtime/engine.h"
#include "test_models.h"
#include "tokenizer/synthetic.h"

namespace kimi {
namespace {

using test::drain;
using test::expect_same;
using test::Out;

class EngineInvariance : public ::testing::Test {
protected:
    static void SetUpTestSuite() { model_ = KimiModel::load(test::make_model("tiny", {}, 21)).release(); }
    static void TearDownTestSuite() { delete model_; }
    static KimiModel* model_;

    SamplingParams params(bool greedy) {
        SamplingParams p;
        p.max_tokens = 12;
        p.ignore_eos = true;
        p.logprobs = 2;
        if (greedy)
            p.temperature = 0;
        else {
            p.temperature = 0.9f;
            p.top_p = 0.95f;
            p.seed = 77;
        }
        return p;
    }

    Out alone(const std::vector<int32_t>& prompt, bool greedy, bool kv_cache_bf16 = false,
              Precision p = EngineConfig{}.precision) {
        EngineConfig c;
        c.threads = 2;
        c.kv_cache_bf16 = kv_cache_bf16;
        c.precision = p;
        Engine e(*model_, c);
        auto s = e.submit(prompt, params(greedy));
        e.run_until_idle();
        return drain(*s);
    }

    // The probe request alongside 15 others submitted at different steps.
    Out crowded(const std::vector<int32_t>& prompt, bool greedy, EngineConfig c, int64_t* preemptions = nullptr) {
        Engine e(*model_, c);
        std::vector<std::shared_ptr<RequestStream>> others;
        std::shared_ptr<RequestStream> probe;
        for (int i = 0; i < 16; ++i) {
            if (i == 5) probe = e.submit(prompt, params(greedy));
            SamplingParams p = params(i % 2 == 0);
            p.max_tokens = 3 + i % 7;
            others.push_back(
                e.submit(test::random_tokens(2 + 3 * i, model_->config().vocab_size, 100 + uint64_t(i)), p));
            e.step();
        }
        e.run_until_idle();
        for (auto& o : others) EXPECT_EQ(drain(*o).finish, FinishReason::kLength);
        EXPECT_EQ(e.cache().blocks().n_free(), e.cache().blocks().n_total());
        EXPECT_EQ(e.cache().slots().n_free(), e.cache().slots().n_total());
        if (preemptions) *preemptions = e.total_preemptions();
        return drain(*probe);
    }

    // Greedy: alone == among 15 others == among them with a 5-token budget, bit for bit.
    void expect_crowded_and_chunked_match(const std::vector<int32_t>& prompt, bool kv_cache_bf16, Precision p,
                                          const char* what);
};
KimiModel* EngineInvariance::model_ = nullptr;

void EngineInvariance::expect_crowded_and_chunked_match(const std::vector<int32_t>& prompt, bool kv_cache_bf16,
                                                        Precision p, const char* what) {
    const Out ref = alone(prompt, true, kv_cache_bf16, p);
    EngineConfig batched;
    batched.threads = 2;
    batched.max_num_seqs = 16;
    batched.kv_cache_bf16 = kv_cache_bf16;
    batched.precision = p;
    expect_same(crowded(prompt, true, batched), ref, (std::string("16 concurrent requests, ") + what).c_str());
    batched.max_num_batched_tokens = 5;
    expect_same(crowded(prompt, true, batched), ref, (std::string("token budget 5, ") + what).c_str());
}

TEST_F(EngineInvariance, GreedyAndSeeded) {
    const auto prompt = test::random_tokens(30, model_->config().vocab_size, 9);
    for (bool greedy : {true, false}) {
        const Out ref = alone(prompt, greedy);
        ASSERT_EQ(ref.tokens.size(), 12u);
        EngineConfig batched;
        batched.threads = 2;
        batched.max_num_seqs = 16;
        expect_same(crowded(prompt, greedy, batched), ref, "16 concurrent requests");
        EngineConfig tiny_budget = batched;
        tiny_budget.max_num_batched_tokens = 5;
        expect_same(crowded(prompt, greedy, tiny_budget), ref, "token budget 5");
        EngineConfig small_cache = batched;
        small_cache.max_model_len = 64;
        small_cache.n_blocks = 8;   // 128 tokens of MLA cache for 16 requests: preemption
        int64_t preemptions = 0;
        expect_same(crowded(prompt, greedy, small_cache, &preemptions), ref, "preemption");
        EXPECT_GT(preemptions, 0) << "the small cache must actually preempt";
    }
}

// The same with the MLA latents stored as bf16 (--kv-cache-dtype bf16): still bit-identical
// alone, crowded and chunked, and the cache bytes per block are halved.
TEST_F(EngineInvariance, Bf16LatentCache) {
    const auto prompt = test::random_tokens(30, model_->config().vocab_size, 9);
    expect_crowded_and_chunked_match(prompt, true, EngineConfig{}.precision, "bf16 latents");
    EXPECT_EQ(model_->cache_geometry(1, 1, 16, true).bytes_per_block() * 2,
              model_->cache_geometry(1, 1, 16).bytes_per_block());
}

// A checkpoint with every linear in MXFP4 (kimi-cpp quantize --targets all-linear): alone,
// among 15 other requests and with a 5-token budget, bit for bit, in both precisions.
TEST_F(EngineInvariance, Mxfp4Weights) {
    const std::string q = test::temp_dir("mxfp4-engine") + "/q";
    QuantizeOptions o;
    o.targets = "all-linear";
    quantize_checkpoint(test::make_model("tiny", {}, 21), q, o);
    KimiModel* const dense = model_;
    const std::unique_ptr<KimiModel> quantized = KimiModel::load(q);
    model_ = quantized.get();
    ASSERT_EQ(model_->weights().layers[0].kda.q_proj.dtype, DType::kMXFP4);
    const auto prompt = test::random_tokens(30, model_->config().vocab_size, 9);
    for (Precision p : {Precision::kF32, Precision::kBF16}) expect_crowded_and_chunked_match(prompt, false, p, "MXFP4");
    model_ = dense;
}

TEST_F(EngineInvariance, RejectsWhatCanNeverFit) {
    EngineConfig c;
    c.max_model_len = 32;
    Engine e(*model_, c);
    SamplingParams p;
    p.max_tokens = 10;
    EXPECT_THROW(e.submit(test::random_tokens(30, 1280, 1), p), Error);
    EXPECT_THROW(e.submit({}, p), Error);
    EXPECT_THROW(e.submit({1, 99999}, p), Error);
}

TEST_F(EngineInvariance, CancelMidPrefill) {
    EngineConfig c;
    c.max_num_batched_tokens = 4;
    Engine e(*model_, c);
    SamplingParams p;
    p.max_tokens = 5;
    auto s = e.submit(test::random_tokens(40, 1280, 2), p);
    e.step();
    e.cancel(s->id());
    e.run_until_idle();
    EXPECT_EQ(drain(*s).finish, FinishReason::kAbort);
    EXPECT_EQ(e.cache().blocks().n_free(), e.cache().blocks().n_total());
    EXPECT_EQ(e.cache().slots().n_free(), e.cache().slots().n_total());
}

TEST_F(EngineInvariance, SteadyStateDecodeStepAllocatesNothing) {
    EngineConfig c;
    c.threads = 2;
    Engine e(*model_, c);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 40;
    p.ignore_eos = true;
    auto s = e.submit(test::random_tokens(8, 1280, 3), p);
    for (int i = 0; i < 10; ++i) e.step();   // prefill + warm-up decode steps
    for (int i = 0; i < 20; ++i) {
        e.step();
        EXPECT_EQ(e.last_step().heap_allocations, 0) << "decode step " << i;
        EXPECT_EQ(e.last_step().attn_output_copies, 0);
    }
}

TEST_F(EngineInvariance, CacheSizedFromMemoryBudget) {
    EngineConfig c;
    c.max_num_seqs = 4;
    c.max_model_len = 256;
    const CacheSizing def = Engine(*model_, c).sizing();
    EXPECT_EQ(def.n_slots, 4);
    EXPECT_EQ(def.n_blocks, 4 * 256 / 16);   // default: max_num_seqs full-length sequences
    ASSERT_GT(def.block_bytes, 0);
    c.cache_memory_bytes = 4 * def.slot_bytes + 100 * def.block_bytes + def.block_bytes / 2;
    Engine e(*model_, c);
    EXPECT_EQ(e.sizing().n_blocks, 100);
    EXPECT_LE(e.sizing().total_bytes(), c.cache_memory_bytes);
    EXPECT_EQ(e.cache().blocks().n_total(), 100);
    EXPECT_NE(e.sizing().describe().find("100 blocks"), std::string::npos);
    c.cache_memory_bytes = 4 * def.slot_bytes + 15 * def.block_bytes;   // < one 256-token sequence
    EXPECT_THROW(Engine(*model_, c), Error);
}

// Text events and stop strings through the engine, with the model's tokenizer.
class EngineText : public test::TinyWithTokenizer {
protected:
    Out run(const SamplingParams& p, int n_others = 0) {
        EngineConfig c;
        c.threads = 2;
        c.max_num_batched_tokens = 7;
        Engine e(*model_, c, tok_);
        std::vector<std::shared_ptr<RequestStream>> others;
        for (int i = 0; i < n_others; ++i)
            others.push_back(e.submit(test::random_tokens(5 + i, 1280, 50 + uint64_t(i)), p));
        auto s = e.submit(tok_->encode("Once upon a time, in a land far away,"), p);
        e.run_until_idle();
        return drain(*s);
    }
};

TEST_F(EngineText, TextPiecesEqualTheDecodeAndStopStringsCutIt) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 48;
    p.ignore_eos = true;
    p.skip_special_tokens = false;
    const Out full = run(p);
    ASSERT_EQ(full.tokens.size(), 48u);
    EXPECT_EQ(full.finish, FinishReason::kLength);
    EXPECT_EQ(full.text, tok_->decode_lossy(full.tokens));

    // Stop strings taken from the middle of the output, across token boundaries.
    int tried = 0;
    for (size_t k = 3; k + 2 < full.tokens.size() && tried < 6; k += 7) {
        const std::string two = tok_->decode_lossy(std::span(full.tokens).subspan(k - 1, 2));
        if (two.size() < 3) continue;
        const std::string stop = two.substr(1, two.size() - 1);   // starts inside token k-1, ends in token k
        const size_t first = full.text.find(stop);
        ASSERT_NE(first, std::string::npos);
        SamplingParams ps = p;
        ps.stop = {"unused", stop};
        for (int others : {0, 5}) {
            const Out o = run(ps, others);
            EXPECT_EQ(o.finish, FinishReason::kStop) << stop;
            EXPECT_EQ(o.stop_index, 1);
            EXPECT_EQ(o.text, full.text.substr(0, first)) << "stop '" << stop << "'";
            ASSERT_LE(o.tokens.size(), full.tokens.size());
            EXPECT_TRUE(std::equal(o.tokens.begin(), o.tokens.end(), full.tokens.begin()));
            EXPECT_GE(tok_->decode_lossy(o.tokens).size(), first + stop.size());   // the completing token is kept
        }
        ++tried;
    }
    EXPECT_GE(tried, 3);
}

TEST_F(EngineText, StopStringsNeedATokenizer) {
    Engine e(*model_, EngineConfig{});
    SamplingParams p;
    p.stop = {"x"};
    EXPECT_THROW(e.submit({1, 2, 3}, p), Error);
    Engine t(*model_, EngineConfig{}, tok_);
    p.stop = {""};
    EXPECT_THROW(t.submit({1, 2, 3}, p), Error);
}

// The whole step — scheduling, forward, sampling with logprobs, text, publishing — makes
// no heap allocation once decoding is steady.
TEST_F(EngineText, WholeDecodeStepAllocatesNothing) {
    EngineConfig c;
    c.threads = 2;
    Engine e(*model_, c, tok_);
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_p = 0.9f;
    p.seed = 4;
    p.max_tokens = 60;
    p.ignore_eos = true;
    p.logprobs = 5;
    p.stop = {"zzzzqq"};
    auto a = e.submit(tok_->encode("The quick brown fox"), p);
    auto b = e.submit(tok_->encode("jumps over the lazy dog"), p);
    for (int i = 0; i < 10; ++i) e.step();
    for (int i = 0; i < 30; ++i) {
        e.step();
        EXPECT_EQ(e.last_step().n_decode_seqs, 2);
        EXPECT_EQ(e.last_step().step_heap_allocations, 0) << "decode step " << i;
    }
}

}   // namespace
}   // namespace kimi
