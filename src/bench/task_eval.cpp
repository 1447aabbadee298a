// The default model's evaluation set: items and exact-match scoring (task_eval.h).
#include "bench/task_eval.h"

#include <cctype>

#include "bench/jsonl.h"
#include "core/error.h"

namespace kimi::bench {

using J = nlohmann::ordered_json;

namespace {

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos) return "";
    return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

bool request_has_image(const J& request) {
    if (!request.contains("messages") || !request["messages"].is_array()) return false;
    for (const J& m : request["messages"])
        if (m.contains("content") && m["content"].is_array())
            for (const J& part : m["content"])
                if (part.is_object() && part.value("type", "") == "image_url") return true;
    return false;
}

std::string content_of(const J& message) {
    return message.contains("content") && message["content"].is_string() ? message["content"].get<std::string>() : "";
}

// Recursive descent over expr[at..]: sum := product (('+'|'-') product)*,
// product := atom ('*' atom)*, atom := '-'? (digits | '(' sum ')').
class ExprParser {
public:
    explicit ExprParser(const std::string& s) : s_(s) {}
    std::optional<long long> parse() {
        auto v = sum();
        skip();
        if (!v || at_ != s_.size()) return std::nullopt;
        return v;
    }

private:
    static constexpr long long kLimit = 1000000000000000LL;
    static std::optional<long long> bounded(long long v) {
        if (v > kLimit || v < -kLimit) return std::nullopt;
        return v;
    }
    void skip() {
        while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
    }
    bool eat(char c) {
        skip();
        if (at_ < s_.size() && s_[at_] == c) {
            ++at_;
            return true;
        }
        return false;
    }
    std::optional<long long> sum() {
        auto v = product();
        while (v) {
            if (eat('+')) {
                auto r = product();
                v = r ? bounded(*v + *r) : std::nullopt;
            } else if (eat('-')) {
                auto r = product();
                v = r ? bounded(*v - *r) : std::nullopt;
            } else {
                break;
            }
        }
        return v;
    }
    std::optional<long long> product() {
        auto v = atom();
        while (v && eat('*')) {
            auto r = atom();
            if (!r) return std::nullopt;
            // |v|, |r| <= 10^15: the product fits in a long double exactly enough to bound it
            if ((long double)(*v) * (long double)(*r) > (long double)kLimit ||
                (long double)(*v) * (long double)(*r) < -(long double)kLimit)
                return std::nullopt;
            v = *v * *r;
        }
        return v;
    }
    std::optional<long long> atom() {
        if (++depth_ > 64) return std::nullopt;
        std::optional<long long> v;
        if (eat('-')) {
            auto a = atom();
            v = a ? std::optional<long long>(-*a) : std::nullopt;
        } else if (eat('(')) {
            v = sum();
            if (v && !eat(')')) v = std::nullopt;
        } else {
            skip();
            const size_t start = at_;
            long long n = 0;
            while (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_])) && n <= kLimit)
                n = n * 10 + (s_[at_++] - '0');
            if (at_ > start) v = bounded(n);
        }
        --depth_;
        return v;
    }
    const std::string& s_;
    size_t at_ = 0;
    int depth_ = 0;
};

}   // namespace

std::vector<TaskItem> read_task_items(const std::string& path) {
    std::vector<TaskItem> out;
    for (const JsonLine& l : read_jsonl(path)) {
        const J& j = l.value;
        if (!j.is_object() || !j.contains("task") || !j["task"].is_string() || !j.contains("request") ||
            !j["request"].is_object() || !j.contains("answer"))
            throw Error(l.where + ": an item needs \"task\", an object \"request\" and \"answer\"");
        std::string task = j["task"].get<std::string>();
        if (task == "mul_answer") continue;
        if (task == "mul_call") task = "mul";
        if (task == "mul" && !j["answer"].is_object())   // data.py: the call's expected arguments
            throw Error(l.where + ": a mul_call item's answer is its expected arguments");
        TaskItem it;
        it.id = l.line;
        it.task = task;
        it.request = j["request"];
        it.answer = j["answer"];
        it.has_image = request_has_image(it.request);
        out.push_back(std::move(it));
    }
    if (out.empty()) throw Error(path + ": no items");
    return out;
}

std::string normalise_name(const std::string& s) {
    std::string t;
    for (char c : trim(s)) t += char(std::tolower(static_cast<unsigned char>(c)));
    while (!t.empty() && (std::ispunct(static_cast<unsigned char>(t.back())) || t.back() == ' ')) t.pop_back();
    for (const char* article : {"a ", "an ", "the "}) {
        const std::string a = article;
        if (t.rfind(a, 0) == 0) {
            t = trim(t.substr(a.size()));
            break;
        }
    }
    return t;
}

bool score_reply(const TaskItem& item, const J& message) {
    const std::string content = content_of(message);
    if (item.task == "colour" || item.task == "shape")
        return item.answer.is_string() && normalise_name(content) == item.answer.get<std::string>();
    if (!item.answer.is_number_integer()) return false;
    const long long want = item.answer.get<long long>();
    if (item.task == "json") {
        try {
            const J j = J::parse(content);
            return j.is_object() && j.contains("answer") && j["answer"].is_number_integer() &&
                j["answer"].get<long long>() == want;
        } catch (const std::exception&) {
            return false;
        }
    }
    return trim(content) == std::to_string(want);
}

std::optional<CalculatorCall> calculator_call(const J& message) {
    if (!message.contains("tool_calls") || !message["tool_calls"].is_array() || message["tool_calls"].size() != 1)
        return std::nullopt;
    const J& call = message["tool_calls"][0];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) return std::nullopt;
    const J& fn = call["function"];
    if (fn.value("name", "") != "calculator" || !fn.contains("arguments") || !fn["arguments"].is_string())
        return std::nullopt;
    try {
        const J args = J::parse(fn["arguments"].get<std::string>());
        if (!args.is_object() || !args.contains("expression") || !args["expression"].is_string()) return std::nullopt;
        return CalculatorCall{call.value("id", ""), args["expression"].get<std::string>()};
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::optional<long long> eval_expression(const std::string& expr) {
    if (expr.size() > 4096) return std::nullopt;
    return ExprParser(expr).parse();
}

}   // namespace kimi::bench
