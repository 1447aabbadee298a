// The Kimi Linear (K2 family) format behind the ChatFormat interface: rendering by
// render_kimi_linear (kimi_linear_render.cpp: <|im_…|> headers, tool-call section), and an
// output parser that streams the content up to <|tool_calls_section_begin|> and parses the
// section's calls when the generation ends (vLLM's kimi_k2 rule, kimi_linear_tool_calls.cpp).
#include "chat/kimi_linear.h"
#include "core/error.h"

namespace kimi::chat {

namespace {

constexpr std::string_view kSection = "<|tool_calls_section_begin|>";

class KimiLinearParser : public OutputParser {
public:
    void push(std::string_view text, std::vector<Delta>& out) override {
        all_ += text;
        if (in_tools_) return;
        const size_t at = all_.find(kSection, released_);
        if (at != std::string::npos) {
            release(at, out);
            in_tools_ = true;
            return;
        }
        size_t keep = all_.size();   // hold back a possible start of the section marker
        for (size_t n = std::min(kSection.size() - 1, all_.size()); n > 0; --n)
            if (all_.compare(all_.size() - n, n, kSection.substr(0, n)) == 0) {
                keep = all_.size() - n;
                break;
            }
        release(keep, out);
    }
    void finish(std::vector<Delta>& out) override {
        if (!in_tools_) {
            release(all_.size(), out);
            msg_.content = all_;
            return;
        }
        const ParsedToolCalls p = parse_tool_calls_text(all_);
        for (const ToolCallOut& c : p.calls) {
            msg_.tool_calls.push_back(c);
            out.push_back({Delta::kToolCall, {}, int32_t(msg_.tool_calls.size() - 1), msg_.tool_calls.back()});
        }
        std::string content = all_.substr(0, all_.find(kSection));
        if (p.calls.empty()) {   // not a well-formed call: the section stays text
            out.push_back({Delta::kContent, all_.substr(released_), -1, {}});
            content = all_;
        }
        if (!content.empty() || msg_.tool_calls.empty()) msg_.content = content;
    }
    const AssistantMessage& message() const override { return msg_; }

private:
    void release(size_t upto, std::vector<Delta>& out) {
        if (upto > released_) out.push_back({Delta::kContent, all_.substr(released_, upto - released_), -1, {}});
        released_ = std::max(released_, upto);
    }
    std::string all_;
    size_t released_ = 0;
    bool in_tools_ = false;
    AssistantMessage msg_;
};

class KimiLinearFormat : public ChatFormat {
public:
    explicit KimiLinearFormat(const tok::Tokenizer& t) : tok_(t) {}
    const char* name() const override { return "kimi-linear"; }
    bool reasons() const override { return false; }
    tok::ChatPrompt render(const ChatRequest& r) const override {
        ChatOptions opts;
        opts.add_generation_prompt = r.add_generation_prompt;
        opts.allow_special_in_content = r.allow_special_in_content;
        if (!r.tools.is_null() && !r.tools.is_array()) throw Error("tools must be a JSON array");
        return render_kimi_linear(tok_, chat_messages_from_json(r.messages), r.tools, opts);
    }
    std::unique_ptr<OutputParser> new_parser(bool) const override { return std::make_unique<KimiLinearParser>(); }

private:
    const tok::Tokenizer& tok_;
};

}   // namespace

std::unique_ptr<ChatFormat> kimi_linear_format(const tok::Tokenizer& t) {
    return std::make_unique<KimiLinearFormat>(t);
}

}   // namespace kimi::chat
