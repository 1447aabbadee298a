// chat_messages_from_json: OpenAI-style chat messages (as the server receives them and as
// HF apply_chat_template takes them) -> ChatMessage. Follows what the Jinja template reads:
// role, name, content (string / list of parts / null), tool_calls[].id and
// .function.arguments (string, or JSON written with Python json.dumps), tool_call_id.
#include "chat/kimi_linear.h"
#include "core/error.h"
#include "tokenizer/py_json.h"

namespace kimi::chat {
namespace {

std::string where(size_t i) { return "messages[" + std::to_string(i) + "]"; }

std::optional<std::string> opt_string(const nlohmann::ordered_json& m, const char* key, const std::string& ctx) {
    auto it = m.find(key);
    if (it == m.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) throw Error(ctx + "." + key + " must be a string");
    return it->get<std::string>();
}

}   // namespace

std::vector<ChatMessage> chat_messages_from_json(const nlohmann::ordered_json& messages) {
    if (!messages.is_array()) throw Error("messages must be a JSON array");
    std::vector<ChatMessage> out;
    out.reserve(messages.size());
    for (size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        const std::string ctx = where(i);
        if (!m.is_object()) throw Error(ctx + " must be an object");
        ChatMessage msg;
        auto role = opt_string(m, "role", ctx);
        if (!role) throw Error(ctx + " has no role");
        msg.role = *role;
        msg.name = opt_string(m, "name", ctx);
        auto c = m.find("content");
        if (c != m.end() && !c->is_null()) {
            if (c->is_string()) {
                msg.content = c->get<std::string>();
            } else if (c->is_array()) {
                std::vector<ContentPart> parts;
                for (size_t k = 0; k < c->size(); ++k) {
                    const auto& p = (*c)[k];
                    const std::string pctx = ctx + ".content[" + std::to_string(k) + "]";
                    if (!p.is_object()) throw Error(pctx + " must be an object");
                    ContentPart part;
                    auto type = p.find("type");
                    part.is_image = (type != p.end() && type->is_string() && *type == "image") || p.contains("image") ||
                        p.contains("image_url");
                    if (!part.is_image) part.text = opt_string(p, "text", pctx).value_or("");
                    parts.push_back(std::move(part));
                }
                msg.parts = std::move(parts);
            } else {
                throw Error(ctx + ".content must be a string, a list of parts or null");
            }
        }
        auto tcs = m.find("tool_calls");
        if (tcs != m.end() && !tcs->is_null()) {
            if (!tcs->is_array()) throw Error(ctx + ".tool_calls must be a list");
            for (size_t k = 0; k < tcs->size(); ++k) {
                const auto& tc = (*tcs)[k];
                const std::string tctx = ctx + ".tool_calls[" + std::to_string(k) + "]";
                if (!tc.is_object()) throw Error(tctx + " must be an object");
                ToolCallOut call;
                call.id = opt_string(tc, "id", tctx).value_or("");
                auto fn = tc.find("function");
                if (fn == tc.end() || !fn->is_object()) throw Error(tctx + " has no function object");
                call.name = opt_string(*fn, "name", tctx + ".function").value_or("");
                auto args = fn->find("arguments");
                if (args == fn->end()) throw Error(tctx + ".function has no arguments");
                call.arguments = args->is_string() ? args->get<std::string>() : tok::py_json_dumps(*args, false, false);
                msg.tool_calls.push_back(std::move(call));
            }
        }
        msg.tool_call_id = opt_string(m, "tool_call_id", ctx).value_or("");
        out.push_back(std::move(msg));
    }
    return out;
}

}   // namespace kimi::chat
