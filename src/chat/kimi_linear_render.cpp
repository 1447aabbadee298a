// render_kimi_linear: the Kimi Linear chat format rendered natively, producing the same
// text as the Jinja template in chat_template_text.cpp (under HF's trim_blocks/lstrip_blocks),
// with every marker emitted as its special id. Text between two markers is tokenized as one
// segment, so ids == encode(text) whenever content spells no special token.
// Mirrors: Kimi-Linear chat_template.jinja + tokenization_kimi.py apply_chat_template.
#include "chat/kimi_linear.h"
#include "chat/prompt_builder.h"
#include "core/error.h"
#include "tokenizer/py_json.h"

namespace kimi::chat {
namespace {

using Builder = PromptBuilder;

// render_content(msg): string as is; list: text parts, image parts as the media placeholder
// (the template leaves a newline after <|media_end|>); none: nothing.
void render_content(Builder& b, const ChatMessage& m) {
    if (m.parts) {
        for (const ContentPart& p : *m.parts) {
            if (p.is_image) {
                b.special("<|media_start|>");
                b.text("image");
                b.special("<|media_content|>");
                b.special("<|media_pad|>");
                b.special("<|media_end|>");
                b.text("\n");
            } else {
                b.text(p.text);
            }
        }
    } else if (m.content) {
        b.text(*m.content);
    }
}

bool truthy(const nlohmann::ordered_json& v) {
    if (v.is_null()) return false;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();   // json::empty() is false for strings
    if (v.is_array() || v.is_object()) return !v.empty();
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_float()) return v.get<double>() != 0.0;
    if (v.is_number()) return v.get<int64_t>() != 0;
    return true;
}

// tokenization_kimi.py deep_sort_dict, then tojson(separators=(',', ':')).
std::string tools_json(const nlohmann::ordered_json& tools) { return tok::py_json_dumps(tools, true, true); }

}   // namespace

tok::ChatPrompt render_kimi_linear(const tok::Tokenizer& t, const std::vector<ChatMessage>& messages,
                                   const nlohmann::ordered_json& tools, const ChatOptions& opts) {
    Builder b(t, opts.allow_special_in_content);
    if (truthy(tools)) {
        b.special("<|im_system|>");
        b.text("tool_declare");
        b.special("<|im_middle|>");
        b.text(tools_json(tools));
        b.special("<|im_end|>");
    }
    for (const ChatMessage& m : messages) {
        const std::string& role_name = (m.name && !m.name->empty()) ? *m.name : m.role;
        if (m.role == "user")
            b.special("<|im_user|>");
        else if (m.role == "assistant")
            b.special("<|im_assistant|>");
        else
            b.special("<|im_system|>");
        b.text(role_name);
        b.special("<|im_middle|>");
        if (m.role == "assistant") {
            render_content(b, m);
            if (!m.tool_calls.empty()) {
                b.special("<|tool_calls_section_begin|>");
                for (const ToolCallOut& tc : m.tool_calls) {
                    b.special("<|tool_call_begin|>");
                    b.text(tc.id);
                    b.special("<|tool_call_argument_begin|>");
                    b.text(tc.arguments);
                    b.special("<|tool_call_end|>");
                }
                b.special("<|tool_calls_section_end|>");
            }
        } else if (m.role == "tool") {
            b.text("## Return of ");
            b.text(m.tool_call_id);
            b.text("\n");
            render_content(b, m);
        } else {
            render_content(b, m);
        }
        b.special("<|im_end|>");
    }
    if (opts.add_generation_prompt) {
        b.special("<|im_assistant|>");
        b.text("assistant");
        b.special("<|im_middle|>");
    }
    return b.finish();
}

}   // namespace kimi::chat
