// chat_request_from_body: the chat fields of an OpenAI /v1/chat/completions body (and
// vLLM's chat_template_kwargs) → ChatRequest, in request mode.
#include "chat/chat_format.h"
#include "core/error.h"

namespace kimi::chat {

ChatRequest chat_request_from_body(const nlohmann::ordered_json& body) {
    using J = nlohmann::ordered_json;
    if (!body.is_object()) throw Error("the request must be a JSON object");
    ChatRequest r;
    r.parse_string_arguments = true;
    auto field = [&](const char* k) -> const J& {
        static const J null_value;
        auto it = body.find(k);
        return it == body.end() ? null_value : *it;
    };
    if (!field("messages").is_array()) throw Error("messages must be a JSON array");
    r.messages = field("messages");
    r.tools = field("tools");
    if (!r.tools.is_null() && !r.tools.is_array()) throw Error("tools must be a JSON array");
    r.tool_choice = field("tool_choice");
    r.response_format = field("response_format");
    const J& agp = field("add_generation_prompt");
    if (!agp.is_null() && !agp.is_boolean()) throw Error("add_generation_prompt must be true or false");
    r.add_generation_prompt = agp.is_boolean() ? agp.get<bool>() : true;
    const J& effort = field("reasoning_effort");
    if (!effort.is_null()) {
        if (!effort.is_string()) throw Error("reasoning_effort must be a string");
        r.thinking_effort = effort.get<std::string>();
    }
    const J& kw = field("chat_template_kwargs");
    if (!kw.is_null()) {
        if (!kw.is_object()) throw Error("chat_template_kwargs must be an object");
        if (auto it = kw.find("thinking"); it != kw.end() && !it->is_null()) {
            if (!it->is_boolean()) throw Error("chat_template_kwargs.thinking must be true or false");
            r.thinking = it->get<bool>();
        }
        if (auto it = kw.find("thinking_effort"); it != kw.end()) {
            if (it->is_null())
                r.thinking_effort.reset();
            else if (!it->is_string())
                throw Error("chat_template_kwargs.thinking_effort must be a string");
            else
                r.thinking_effort = it->get<std::string>();
        }
    }
    return r;
}

}   // namespace kimi::chat
