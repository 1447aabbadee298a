// GSM8K scorers against the behaviour of the reference Python code (hand-worked cases).
#include <gtest/gtest.h>

#include "bench/gsm8k.h"

namespace kimi::bench {
namespace {

TEST(Gsm8k, VllmAnswerValue) {
    EXPECT_EQ(vllm_answer_value("so 1,234 apples"), 1234);
    EXPECT_EQ(vllm_answer_value("3.5"), 5);   // the decimal point is lost
    EXPECT_EQ(vllm_answer_value("-3"), 3);    // and the sign
    EXPECT_EQ(vllm_answer_value("2 then 7 #### 18"), 18);
    EXPECT_EQ(vllm_answer_value("05"), kGsm8kInvalid);   // literal_eval SyntaxError
    EXPECT_EQ(vllm_answer_value("00"), 0);
    EXPECT_EQ(vllm_answer_value("none"), kGsm8kInvalid);
}

TEST(Gsm8k, Scorers) {
    const std::string gold = "She makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18";
    EXPECT_TRUE(score_vllm(" 9 * 2 = 18 dollars.\n#### 18", gold).correct);
    EXPECT_FALSE(score_vllm(" the answer is 18, I think 19", gold).correct);
    const Score f = score_flexible(" so she makes $18.", gold);
    EXPECT_EQ(f.extracted, "$18.");
    EXPECT_TRUE(f.correct);   // "$" and the trailing "." are normalised away
    EXPECT_TRUE(score_flexible("It is 1,018 or 18", gold).correct);
    EXPECT_TRUE(score_flexible("18", gold).correct);   // the second group (single run of digits)
    EXPECT_FALSE(score_flexible("1,018", gold).correct);
    EXPECT_TRUE(score_flexible("nothing", gold).invalid);
    EXPECT_EQ(score_flexible("nothing", gold).extracted, "[invalid]");
    EXPECT_TRUE(score_strict("blah\n#### 18\nQuestion", gold).correct);
    EXPECT_TRUE(score_strict("no hash 18", gold).invalid);
    EXPECT_FALSE(score_strict("#### 17", gold).correct);
    const std::string neg = "The change is -3 degrees\n#### -3";
    EXPECT_TRUE(score_flexible("it fell to -3", neg).correct);
    EXPECT_TRUE(score_vllm("it fell to 3", neg).correct);   // vLLM drops the sign on both sides
}

TEST(Gsm8k, PromptFormat) {
    const std::vector<Gsm8kItem> shots = {{"q1", "a1\n#### 1"}, {"q2", "a2\n#### 2"}};
    EXPECT_EQ(gsm8k_prompt(shots, "q?"),
              "Question: q1\nAnswer: a1\n#### 1\n\nQuestion: q2\nAnswer: a2\n#### 2\n\nQuestion: q?\nAnswer:");
}

TEST(Gsm8k, Garbled) {
    EXPECT_TRUE(is_garbled(""));
    EXPECT_TRUE(is_garbled("  \n"));
    EXPECT_TRUE(is_garbled("ok \xEF\xBF\xBD"));
    EXPECT_TRUE(is_garbled("a\x01"));
    EXPECT_FALSE(is_garbled(" 3 + 4 = 7\n#### 7"));
}

}   // namespace
}   // namespace kimi::bench
