// Kimi-K3 output parser: the generated XTML (after the generation prompt, special tokens as
// their text) → reasoning_content (think channel), content (response channel) and tool calls
// (call elements; arguments rebuilt as JSON from typed `argument` elements, or a `json`
// element's text). Streaming: text is released only when no marker can start in it, a call
// when its element closes. A reply that breaks the grammar keeps what was parsed and sends the
// rest to content as text; a truncated one drops the unfinished tag or call.
#include <optional>
#include <utility>

#include "chat/k3_format.h"
#include "core/json_depth.h"
#include "tokenizer/py_json.h"

namespace kimi::chat {

namespace {

constexpr std::string_view kMarkers[] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
constexpr size_t kMaxHeader = 4096;   // bytes a tag header (name + attributes) may take before its <|sep|>

bool is_space(std::string_view s) { return s.find_first_not_of(" \t\n\r") == std::string_view::npos; }

// Length of the longest suffix of s that is a proper prefix of a marker (text to hold back).
size_t held_suffix(std::string_view s) {
    const size_t from = s.size() > 16 ? s.size() - 16 : 0;
    for (size_t i = from; i < s.size(); ++i) {
        if (s[i] != '<') continue;
        const std::string_view tail = s.substr(i);
        for (std::string_view m : kMarkers)
            if (tail.size() < m.size() && m.substr(0, tail.size()) == tail) return s.size() - i;
    }
    return 0;
}

// attribute `name="value"` of a tag header (with &quot; / &amp; unescaped)
std::optional<std::string> attribute(std::string_view header, std::string_view name) {
    const std::string key = " " + std::string(name) + "=\"";
    const size_t at = header.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    const size_t begin = at + key.size(), end = header.find('"', begin);
    if (end == std::string_view::npos) return std::nullopt;
    std::string v(header.substr(begin, end - begin)), out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (v.compare(i, 6, "&quot;") == 0) {
            out += '"';
            i += 5;
        } else if (v.compare(i, 5, "&amp;") == 0) {
            out += '&';
            i += 4;
        } else
            out += v[i];
    }
    return out;
}

std::string tag_name(std::string_view header) { return std::string(header.substr(0, header.find(' '))); }

class K3Parser : public OutputParser {
public:
    explicit K3Parser(bool thinking) : state_(thinking ? kThink : kResponse) {}

    void push(std::string_view text, std::vector<Delta>& out) override {
        buf_ += text;
        run(out, false);
    }
    void finish(std::vector<Delta>& out) override {
        run(out, true);
        if (!reasoning_.empty()) msg_.reasoning_content = reasoning_;
        if (!content_.empty() || msg_.tool_calls.empty()) msg_.content = content_;
    }
    const AssistantMessage& message() const override { return msg_; }

private:
    enum State : uint8_t {
        kThink,
        kAfterThink,
        kResponse,
        kAfterResponse,
        kTools,
        kCall,
        kArgument,
        kJson,
        kDone,
        kRaw
    };

    void emit_text(std::string_view s, std::vector<Delta>& out) {
        if (s.empty()) return;
        if (state_ == kThink) {
            reasoning_ += s;
            out.push_back({Delta::kReasoning, std::string(s), -1, {}});
        } else if (state_ == kResponse || state_ == kRaw) {
            content_ += s;
            out.push_back({Delta::kContent, std::string(s), -1, {}});
        } else if (state_ == kArgument || state_ == kJson) {
            value_ += s;
        } else if (is_space(s)) {
            // whitespace between tags: dropped, unless text follows (it may come in a later
            // piece, so it is held until then: the result must not depend on the chunking)
            space_ += s;
        } else {
            to_raw(s, out);   // text where only tags may stand
        }
    }
    // The grammar broke: from here everything is content, as text (with the held whitespace).
    void to_raw(std::string_view s, std::vector<Delta>& out) {
        state_ = kRaw;
        emit_text(std::exchange(space_, std::string()) + std::string(s), out);
    }

    void run(std::vector<Delta>& out, bool at_end) {
        size_t pos = 0;
        while (pos < buf_.size()) {
            if (state_ == kRaw) {
                emit_text(std::string_view(buf_).substr(pos), out);
                pos = buf_.size();
                break;
            }
            const size_t lt = buf_.find("<|", pos);
            if (lt == std::string::npos) {
                // hold back what may start a marker; at the end it is a truncated tag: dropped
                std::string_view rest = std::string_view(buf_).substr(pos);
                const size_t hold = held_suffix(rest);
                emit_text(rest.substr(0, rest.size() - hold), out);
                pos = at_end ? buf_.size() : pos + rest.size() - hold;
                break;
            }
            emit_text(std::string_view(buf_).substr(pos, lt - pos), out);
            pos = lt;
            // that text broke the grammar: the marker is text too (as when it arrives later)
            if (state_ == kRaw) continue;
            const std::string_view tail = std::string_view(buf_).substr(pos);
            std::string_view marker;
            for (std::string_view m : kMarkers)
                if (tail.substr(0, m.size()) == m) marker = m;
            if (marker.empty()) {
                bool prefix = false;
                for (std::string_view m : kMarkers)
                    prefix = prefix || (tail.size() < m.size() && m.substr(0, tail.size()) == tail);
                if (prefix && !at_end) break;   // wait for the rest of the marker
                if (prefix) {
                    pos = buf_.size();
                    break;
                }                       // truncated marker: dropped
                emit_text("<|", out);   // not a marker: text
                pos += 2;
                continue;
            }
            if (marker == "<|end_of_msg|>") {
                pos += marker.size();
                state_ = kDone;
                space_.clear();
                continue;
            }
            if (marker == "<|sep|>") {   // a stray separator
                to_raw(tail, out);
                pos = buf_.size();
                break;
            }
            size_t sep = buf_.find("<|sep|>", pos + marker.size());
            // a separator past kMaxHeader bytes counts as none, as when it arrives in a later piece
            if (sep != std::string::npos && sep + 7 - pos > kMaxHeader) sep = std::string::npos;
            if (sep == std::string::npos) {
                if (buf_.size() - pos > kMaxHeader) {   // no tag header is this long: not a tag
                    to_raw(tail, out);
                    pos = buf_.size();
                } else if (at_end) {
                    pos = buf_.size();   // truncated tag: dropped
                }
                break;   // else the tag header is still coming
            }
            const std::string header = buf_.substr(pos + marker.size(), sep - pos - marker.size());
            if (header.find("<|") != std::string::npos) {
                to_raw(tail, out);
                pos = buf_.size();
                break;
            }
            const size_t next = sep + 7;
            if (!tag(marker == "<|open|>", header, out)) {
                to_raw(std::string_view(buf_).substr(pos, next - pos), out);
            } else {
                space_.clear();
            }
            pos = next;
        }
        buf_.erase(0, pos);
    }

    // One complete tag; false if it does not fit the grammar here.
    bool tag(bool open, const std::string& header, std::vector<Delta>& out) {
        const std::string name = tag_name(header);
        switch (state_) {
            case kThink:
                if (!open && name == "think") {
                    state_ = kAfterThink;
                    return true;
                }
                return false;
            case kAfterThink:
                if (open && name == "response") {
                    state_ = kResponse;
                    return true;
                }
                return false;
            case kResponse:
                if (!open && name == "response") {
                    state_ = kAfterResponse;
                    return true;
                }
                return false;
            case kAfterResponse:
                if (open && name == "tools") {
                    state_ = kTools;
                    return true;
                }
                if (!open && name == "message") {
                    state_ = kDone;
                    return true;
                }
                return false;
            case kTools:
                if (open && name == "call") {
                    auto tool = attribute(header, "tool");
                    if (!tool || tool->empty()) return false;   // a call with no name
                    begin_call(*tool);
                    state_ = kCall;
                    return true;
                }
                if (!open && name == "tools") {
                    state_ = kAfterResponse;
                    return true;
                }
                return false;
            case kCall:
                if (open && (name == "argument" || name == "json")) {
                    key_ = attribute(header, "key").value_or("");
                    type_ = attribute(header, "type").value_or("string");
                    if (name == "argument" && key_.empty()) return false;
                    value_.clear();
                    state_ = name == "argument" ? kArgument : kJson;
                    return true;
                }
                if (!open && name == "call") {
                    end_call(out);
                    state_ = kTools;
                    return true;
                }
                return false;
            case kArgument:
                if (!open && name == "argument") {
                    end_argument();
                    state_ = kCall;
                    return true;
                }
                return false;
            case kJson:
                if (!open && name == "json") {
                    json_text_ = value_;
                    state_ = kCall;
                    return true;
                }
                return false;
            case kDone:
            case kRaw: return false;
        }
        return false;
    }

    // What the tags of a tool call do with it: tag() decides which may come; these keep the data.
    void begin_call(const std::string& tool) {
        call_ = ToolCallOut{};
        call_.name = tool;
        args_ = nlohmann::ordered_json::object();
        json_text_.reset();
    }
    void end_argument() {
        if (type_ == "string") {
            args_[key_] = value_;
        } else {
            // too deep to be walked safely, or not JSON: kept as the text
            auto v = json_depth_within(value_) ? nlohmann::ordered_json::parse(value_, nullptr, false)
                                               : nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
            args_[key_] = v.is_discarded() ? nlohmann::ordered_json(value_) : v;
        }
    }
    void end_call(std::vector<Delta>& out) {
        const int32_t index = int32_t(msg_.tool_calls.size());
        call_.id = "functions." + call_.name + ":" + std::to_string(index);
        call_.arguments = json_text_ ? *json_text_ : tok::py_json_dumps(args_, false, false);
        msg_.tool_calls.push_back(call_);
        out.push_back({Delta::kToolCall, {}, index, call_});
    }

    State state_;
    std::string buf_, reasoning_, content_, space_;
    AssistantMessage msg_;
    ToolCallOut call_;
    nlohmann::ordered_json args_;
    std::optional<std::string> json_text_;
    std::string key_, type_, value_;
};

}   // namespace

std::unique_ptr<OutputParser> K3Format::new_parser(bool thinking) const { return std::make_unique<K3Parser>(thinking); }

}   // namespace kimi::chat
