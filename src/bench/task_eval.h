// The default model's evaluation set (tools/train_default/data.py; docs/measuring.md#tasks):
// its items, and how a reply is scored, exact match per task:
//   add2, sub2, add3, word   the final content is the number, nothing else (spaces aside);
//   json                     the content parses as JSON, an object whose "answer" is the number;
//   colour, shape            the content names it ("Red.", "A circle." → red, circle);
//   mul                      the first reply is one `calculator` call whose arguments are a JSON
//                            object with an "expression" that evaluates to the product, and the
//                            reply after the tool's result (the harness evaluates the expression)
//                            has the product as its content.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::bench {

struct TaskItem {
    int64_t id = 0;                   // its line in the file (1-based)
    std::string task;                 // add2 | sub2 | add3 | word | json | mul | colour | shape
    nlohmann::ordered_json request;   // an OpenAI chat-completions body, without model and sampling
    nlohmann::ordered_json answer;    // a number, or a colour / shape name
    bool has_image = false;
};

// data.py's JSONL ({"task", "request", "answer", ...} a line). A multiplication's second-turn
// rows ("mul_answer") are left out: the harness builds that turn from the model's own call.
// Throws kimi::Error naming the file and line.
std::vector<TaskItem> read_task_items(const std::string& path);

// "Red." → "red", " A circle " → "circle": lower case, a leading article and trailing
// punctuation and spaces removed.
std::string normalise_name(const std::string& s);

// A single-turn item's reply message (OpenAI's `message` object) against its answer.
bool score_reply(const TaskItem& item, const nlohmann::ordered_json& message);

// The calculator call of a reply: its id and expression, or nullopt (no call, another tool,
// more than one call, arguments that are not a JSON object with a string "expression").
struct CalculatorCall {
    std::string id, expression;
};
std::optional<CalculatorCall> calculator_call(const nlohmann::ordered_json& message);

// An integer expression of + - * and parentheses (spaces anywhere); nullopt if it is not one
// or a value leaves ±10^15.
std::optional<long long> eval_expression(const std::string& expr);

}   // namespace kimi::bench
