// The default model's evaluation set: item reading, exact-match scoring, the calculator's call
// and expression evaluator (src/bench/task_eval.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "bench/task_eval.h"
#include "core/error.h"

namespace kimi::bench {
namespace {

using J = nlohmann::ordered_json;

TaskItem item(const std::string& task, J answer) {
    TaskItem it;
    it.task = task;
    it.answer = std::move(answer);
    return it;
}

J reply(const std::string& content) { return J{{"role", "assistant"}, {"content", content}}; }

TEST(TaskEval, NumbersAreExact) {
    EXPECT_TRUE(score_reply(item("add2", 82), reply("82")));
    EXPECT_TRUE(score_reply(item("add2", 82), reply(" 82\n")));   // spaces aside
    EXPECT_FALSE(score_reply(item("add2", 82), reply("82.")));
    EXPECT_FALSE(score_reply(item("add2", 82), reply("The answer is 82")));
    EXPECT_FALSE(score_reply(item("sub2", 8), reply("08")));
    EXPECT_TRUE(score_reply(item("sub2", -3), reply("-3")));
    EXPECT_FALSE(score_reply(item("add3", 1000), reply("")));
    EXPECT_FALSE(score_reply(item("word", 5), J{{"role", "assistant"}, {"content", nullptr}}));
}

TEST(TaskEval, JsonAnswers) {
    EXPECT_TRUE(score_reply(item("json", 82), reply("{\"answer\": 82}")));
    EXPECT_TRUE(score_reply(item("json", 82), reply(" {\"answer\":82} ")));
    EXPECT_FALSE(score_reply(item("json", 82), reply("{\"answer\": \"82\"}")));   // a string
    EXPECT_FALSE(score_reply(item("json", 82), reply("{\"answer\": 82.5}")));
    EXPECT_FALSE(score_reply(item("json", 82), reply("{\"answer\": 81}")));
    EXPECT_FALSE(score_reply(item("json", 82), reply("{\"answer\": 82")));   // does not parse
    EXPECT_FALSE(score_reply(item("json", 82), reply("[82]")));
}

TEST(TaskEval, Names) {
    EXPECT_EQ(normalise_name(" A circle. "), "circle");
    EXPECT_EQ(normalise_name("Red."), "red");
    EXPECT_EQ(normalise_name("an orange!"), "orange");
    EXPECT_TRUE(score_reply(item("colour", "red"), reply("Red.")));
    EXPECT_FALSE(score_reply(item("colour", "red"), reply("Dark red.")));
    EXPECT_TRUE(score_reply(item("shape", "triangle"), reply("A triangle.")));
    EXPECT_FALSE(score_reply(item("shape", "triangle"), reply("A square.")));
}

TEST(TaskEval, CalculatorCall) {
    auto msg = [](const std::string& name, const std::string& args) {
        return J{{"role", "assistant"},
                 {"content", ""},
                 {"tool_calls",
                  J::array({J{{"id", "functions.calculator:0"},
                              {"type", "function"},
                              {"function", {{"name", name}, {"arguments", args}}}}})}};
    };
    const auto c = calculator_call(msg("calculator", "{\"expression\": \"12 * 7\"}"));
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->id, "functions.calculator:0");
    EXPECT_EQ(c->expression, "12 * 7");
    EXPECT_FALSE(calculator_call(msg("search", "{\"expression\": \"12 * 7\"}")));
    EXPECT_FALSE(calculator_call(msg("calculator", "{\"expression\": 84}")));
    EXPECT_FALSE(calculator_call(msg("calculator", "{\"expression\": \"12 * 7\"")));   // invalid JSON
    EXPECT_FALSE(calculator_call(msg("calculator", "[\"12 * 7\"]")));
    EXPECT_FALSE(calculator_call(reply("84")));
    J two = msg("calculator", "{\"expression\": \"1\"}");
    two["tool_calls"].push_back(two["tool_calls"][0]);
    EXPECT_FALSE(calculator_call(two));
}

TEST(TaskEval, Expressions) {
    EXPECT_EQ(eval_expression("12 * 7"), 84);
    EXPECT_EQ(eval_expression("2+3*4"), 14);
    EXPECT_EQ(eval_expression(" (2 + 3) * 4 "), 20);
    EXPECT_EQ(eval_expression("10 - 2 - 3"), 5);   // left to right
    EXPECT_EQ(eval_expression("-4 * -2"), 8);
    EXPECT_EQ(eval_expression("999999999999999 * 1"), 999999999999999LL);
    EXPECT_FALSE(eval_expression("9999999999999999"));   // past 10^15
    EXPECT_FALSE(eval_expression("99999999 * 99999999"));
    EXPECT_FALSE(eval_expression("12 / 4"));
    EXPECT_FALSE(eval_expression("12 *"));
    EXPECT_FALSE(eval_expression("(1 + 2"));
    EXPECT_FALSE(eval_expression(""));
    EXPECT_FALSE(eval_expression("1 2"));
    EXPECT_FALSE(eval_expression(std::string(200, '(') + "1" + std::string(200, ')')));   // too deep
}

TEST(TaskEval, ReadsItems) {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("kimi-task-eval-" + std::to_string(::getpid()) + ".jsonl")).string();
    {
        std::ofstream f(path);
        f << R"({"task":"add2","request":{"messages":[{"role":"user","content":"What is 1 + 2?"}]},"answer":3})"
          << "\n\n";
        f << R"({"task":"mul_call","request":{"messages":[]},"answer":{"expression":"3 * 4"}})"
          << "\n";
        f << R"({"task":"mul_answer","request":{"messages":[]},"answer":12})"
          << "\n";
        f << R"({"task":"colour","request":{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]},"answer":"red"})"
          << "\n";
    }
    const auto items = read_task_items(path);
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(items[0].id, 1);
    EXPECT_EQ(items[1].task, "mul");   // the call's row; the second turn is the harness's
    EXPECT_EQ(items[1].id, 3);
    EXPECT_FALSE(items[0].has_image);
    EXPECT_TRUE(items[2].has_image);
    {
        std::ofstream f(path);
        f << "{\"task\": \"add2\"}\n";
    }
    EXPECT_THROW(read_task_items(path), Error);
    std::filesystem::remove(path);
    EXPECT_THROW(read_task_items(path), Error);
}

}   // namespace
}   // namespace kimi::bench
