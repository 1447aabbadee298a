// GSM8K prompt building and answer scoring, two scorers as documented in
// docs/measuring.md: vLLM tests/evals/gsm8k (`get_answer_value`: commas removed, the last run
// of digits, invalid if it is not a Python int literal such as "05") and lm-evaluation-harness
// gsm8k (`flexible-extract` — the last match of (-?[$0-9.,]{2,})|(-?[0-9]+) — and
// `strict-match` — the first "#### (-?[0-9.,]+)" — each compared by exact_match after
// removing ",", "$", everything up to "#### ", a trailing ".").
#pragma once
#include <string>
#include <vector>

namespace kimi::bench {

struct Gsm8kItem {
    std::string question, answer;
};

std::vector<Gsm8kItem> read_gsm8k(const std::string& path);   // JSONL; '#' lines skipped; throws kimi::Error

// few-shot block ("Question: q\nAnswer: a\n\n" × shots) + "Question: q\nAnswer:".
std::string gsm8k_prompt(const std::vector<Gsm8kItem>& shots, const std::string& question);

// vLLM: the integer, or kInvalid.
constexpr long long kGsm8kInvalid = -9999999;
long long vllm_answer_value(const std::string& text);

struct Score {
    std::string extracted;   // what the scorer read ("[invalid]" / "-9999999" when nothing)
    bool correct = false;
    bool invalid = false;
};
Score score_vllm(const std::string& response, const std::string& gold_answer);
Score score_flexible(const std::string& response, const std::string& gold_answer);
Score score_strict(const std::string& response, const std::string& gold_answer);

// U+FFFD, a control character other than \t \n \r, or an empty response.
bool is_garbled(const std::string& response);

}   // namespace kimi::bench
