// OpenAI JSON shapes of parsed output (see chat_json.h).
#include "chat/chat_json.h"

namespace kimi::chat {

using J = nlohmann::ordered_json;

namespace {
J call_json(const ToolCallOut& c) {
    return J{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}
J opt(const std::optional<std::string>& s) { return s ? J(*s) : J(nullptr); }
}   // namespace

J message_json(const AssistantMessage& m) {
    J j{{"role", "assistant"}, {"content", opt(m.content)}, {"reasoning_content", opt(m.reasoning_content)}};
    if (!m.tool_calls.empty()) {
        j["tool_calls"] = J::array();
        for (const ToolCallOut& c : m.tool_calls) j["tool_calls"].push_back(call_json(c));
    }
    return j;
}

J delta_json(const Delta& d) {
    switch (d.kind) {
        case Delta::kReasoning: return J{{"reasoning_content", d.text}};
        case Delta::kContent: return J{{"content", d.text}};
        case Delta::kToolCall: {
            J c = call_json(d.call);
            c.erase("id");
            J out{{"index", d.tool_index}, {"id", d.call.id}};
            out.update(c);
            return J{{"tool_calls", J::array({out})}};
        }
    }
    return J::object();
}

std::vector<Delta> merge_deltas(const std::vector<Delta>& ds) {
    std::vector<Delta> out;
    for (const Delta& d : ds) {
        if (d.kind != Delta::kToolCall && d.text.empty()) continue;
        if (!out.empty() && d.kind != Delta::kToolCall && out.back().kind == d.kind)
            out.back().text += d.text;
        else
            out.push_back(d);
    }
    return out;
}

}   // namespace kimi::chat
