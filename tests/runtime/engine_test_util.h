// What the engine tests read back from a request: tokens, log-probabilities, text and how it
// finished; and the bit-for-bit comparison of two such results.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "test_models.h"
#include "tokenizer/synthetic.h"
#include "tokenizer/tokenizer.h"

namespace kimi::test {

struct Out {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::string text;
    FinishReason finish = FinishReason::kNone;
    int32_t stop_index = -1;
    int64_t cached_tokens = 0;
};

// Suites that run the tiny model with its synthetic tokenizer (text, stop strings, grammars).
class TinyWithTokenizer : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const std::string dir = make_model("tiny", {}, 21);
        tok::write_synthetic_tokenizer(dir, 1024, 21);
        model_ = KimiModel::load(dir).release();
        tok_ = new tok::Tokenizer(tok::Tokenizer::load(dir));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete tok_;
        model_ = nullptr;
        tok_ = nullptr;
    }
    static inline KimiModel* model_ = nullptr;
    static inline tok::Tokenizer* tok_ = nullptr;
};

inline Out drain(RequestStream& s) {
    Out o;
    TokenEvent e;
    while (s.next(e)) {
        if (e.token >= 0) {
            o.tokens.push_back(e.token);
            o.logprobs.push_back(e.logprob);
        }
        o.text += e.text;
        o.finish = e.finish;
        o.stop_index = e.stop_index;
        o.cached_tokens = e.cached_tokens;
    }
    return o;
}

inline void expect_same(const Out& a, const Out& b, const std::string& what) {
    EXPECT_EQ(a.tokens, b.tokens) << what;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
    EXPECT_EQ(0, std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float))) << what;
    EXPECT_EQ(a.finish, b.finish) << what;
}

}   // namespace kimi::test
