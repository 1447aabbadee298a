// GSM8K prompts and scorers (see gsm8k.h).
#include "bench/gsm8k.h"

#include <regex>

#include <nlohmann/json.hpp>

#include "bench/jsonl.h"
#include "core/error.h"

namespace kimi::bench {

std::vector<Gsm8kItem> read_gsm8k(const std::string& path) {
    std::vector<Gsm8kItem> out;
    for (const auto& j : read_jsonl(path)) {
        try {
            out.push_back({j.value.at("question").get<std::string>(), j.value.at("answer").get<std::string>()});
        } catch (const std::exception& e) {
            throw Error(j.where + ": " + e.what());
        }
    }
    return out;
}

std::string gsm8k_prompt(const std::vector<Gsm8kItem>& shots, const std::string& question) {
    std::string p;
    for (const auto& s : shots) p += "Question: " + s.question + "\nAnswer: " + s.answer + "\n\n";
    return p + "Question: " + question + "\nAnswer:";
}

long long vllm_answer_value(const std::string& text) {
    std::string t;
    for (char c : text)
        if (c != ',') t += c;
    // The last run of ASCII digits.
    size_t end = std::string::npos, start = 0;
    for (size_t i = t.size(); i-- > 0;) {
        if (t[i] >= '0' && t[i] <= '9') {
            if (end == std::string::npos) end = i + 1;
            start = i;
        } else if (end != std::string::npos) {
            break;
        }
    }
    if (end == std::string::npos) return kGsm8kInvalid;
    const std::string d = t.substr(start, end - start);
    // Python's ast.literal_eval: "0", "00" are fine; a leading zero before other digits is a SyntaxError.
    if (d.size() > 1 && d[0] == '0' && d.find_first_not_of('0') != std::string::npos) return kGsm8kInvalid;
    if (d.size() > 18) return kGsm8kInvalid;   // beyond any GSM8K answer; avoids overflow
    return std::stoll(d);
}

Score score_vllm(const std::string& response, const std::string& gold_answer) {
    Score s;
    const long long pred = vllm_answer_value(response), gold = vllm_answer_value(gold_answer);
    s.extracted = std::to_string(pred);
    s.invalid = pred == kGsm8kInvalid;
    s.correct = pred == gold;
    return s;
}

namespace {
// lm-eval exact_match normalisation: drop ",", "$", everything through the last "#### ", a
// trailing "."; lowercase.
std::string lm_eval_normalise(std::string s) {
    const size_t hash = s.rfind("#### ");
    if (hash != std::string::npos) s = s.substr(hash + 5);
    std::string t;
    for (char c : s)
        if (c != ',' && c != '$') t += char(std::tolower(static_cast<unsigned char>(c)));
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t;
}

std::string strip(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos) return "";
    return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

Score lm_eval_score(const std::string& extracted, bool found, const std::string& gold_answer) {
    Score s;
    s.extracted = found ? strip(extracted) : "[invalid]";
    s.invalid = !found;
    s.correct = lm_eval_normalise(s.extracted) == lm_eval_normalise(gold_answer);
    return s;
}
}   // namespace

Score score_flexible(const std::string& response, const std::string& gold_answer) {
    static const std::regex re("(-?[$0-9.,]{2,})|(-?[0-9]+)");
    std::string last;
    bool found = false;
    for (auto it = std::sregex_iterator(response.begin(), response.end(), re); it != std::sregex_iterator(); ++it) {
        last = (*it)[1].matched && (*it)[1].length() > 0 ? (*it)[1].str() : (*it)[2].str();
        found = true;
    }
    return lm_eval_score(last, found, gold_answer);
}

Score score_strict(const std::string& response, const std::string& gold_answer) {
    static const std::regex re("#### (\\-?[0-9\\.\\,]+)");
    std::smatch m;
    const bool found = std::regex_search(response, m, re);
    return lm_eval_score(found ? m[1].str() : "", found, gold_answer);
}

bool is_garbled(const std::string& r) {
    if (strip(r).empty()) return true;
    if (r.find("\xEF\xBF\xBD") != std::string::npos) return true;
    for (unsigned char c : r)
        if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7F) return true;
    return false;
}

}   // namespace kimi::bench
