// The Responses reply and its events (see responses_reply.h).
// ref: docs/server.md#responses, OpenAI's Responses API and streaming references.
#include "server/responses_reply.h"

#include <algorithm>
#include <ctime>

#include "server/responses_request.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;

// The text field of an item's one content part: output_text or reasoning_text.
J& part_of(J& item) { return item["content"][0]; }

}   // namespace

ResponsesReply::ResponsesReply(std::string model, J echo, Write write)
    : id_(random_id("resp_")), model_(std::move(model)), echo_(std::move(echo)), write_(std::move(write)) {
    created_at_ = int64_t(std::time(nullptr));
}

J ResponsesReply::object(const char* status) const {
    J r = {{"id", id_},        {"object", "response"},          {"created_at", created_at_}, {"status", status},
           {"error", nullptr}, {"incomplete_details", nullptr}, {"model", model_},           {"output", items_}};
    r.update(echo_);
    return r;
}

bool ResponsesReply::event(const char* type, J data) {
    if (!write_) return true;
    J e = {{"type", type}, {"sequence_number", sequence_++}};
    e.update(data);
    return write_(std::string("event: ") + type + "\ndata: " + e.dump(-1, ' ', false, J::error_handler_t::replace) +
                  "\n\n");
}

bool ResponsesReply::start() {
    const J r = object("in_progress");
    return event("response.created", {{"response", r}}) && event("response.in_progress", {{"response", r}});
}

bool ResponsesReply::close(const char* status) {
    if (!item_open_) return true;
    item_open_ = false;
    J& item = items_.back();
    const size_t index = items_.size() - 1;
    const std::string type = item["type"];
    if (item.contains("status")) item["status"] = status;
    if (type == "reasoning" && encrypted_reasoning_)
        item["encrypted_content"] = reasoning_token(part_of(item)["text"].get<std::string>());
    const J where = {{"item_id", item["id"]}, {"output_index", index}};
    bool ok = true;
    if (type == "function_call") {
        J d = where;
        d["arguments"] = item["arguments"];
        d["name"] = item["name"];
        ok = event("response.function_call_arguments.done", std::move(d));
    } else if (type == "custom_tool_call") {
        J d = where;
        d["input"] = item["input"];
        ok = event("response.custom_tool_call_input.done", std::move(d));
    } else {
        J d = where, p = where;
        d["content_index"] = 0;
        p["content_index"] = 0;
        p["part"] = part_of(item);
        if (type == "message") {
            d["text"] = part_of(item)["text"];
            d["logprobs"] = J::array();
            ok = event("response.output_text.done", std::move(d));
        } else {
            d["text"] = part_of(item)["text"];
            ok = event("response.reasoning_text.done", std::move(d));
        }
        ok = ok && event("response.content_part.done", std::move(p));
    }
    return ok && event("response.output_item.done", {{"output_index", index}, {"item", item}});
}

bool ResponsesReply::open(J item) {
    if (!close()) return false;
    J added = item;
    if (item.contains("content")) added["content"] = J::array();   // the part is added next
    items_.push_back(std::move(item));
    item_open_ = true;
    const size_t index = items_.size() - 1;
    if (!event("response.output_item.added", {{"output_index", index}, {"item", added}})) return false;
    if (!items_.back().contains("content")) return true;
    return event("response.content_part.added",
                 {{"item_id", items_.back()["id"]},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", part_of(items_.back())}});
}

bool ResponsesReply::add(const chat::Delta& d) {
    switch (d.kind) {
        case chat::Delta::kReasoning:
        case chat::Delta::kContent: {
            if (d.text.empty()) return true;
            const bool reasoning = d.kind == chat::Delta::kReasoning;
            const char* type = reasoning ? "reasoning" : "message";
            if (!item_open_ || items_.back()["type"] != type) {
                J item = reasoning ? J{{"id", random_id("rs_")},
                                       {"type", "reasoning"},
                                       {"summary", J::array()},
                                       {"content", J::array({{{"type", "reasoning_text"}, {"text", ""}}})}}
                                   : J{{"id", random_id("msg_")},
                                       {"type", "message"},
                                       {"status", "in_progress"},
                                       {"role", "assistant"},
                                       {"content",
                                        J::array({{{"type", "output_text"},
                                                   {"text", ""},
                                                   {"annotations", J::array()},
                                                   {"logprobs", J::array()}}})}};
                if (!open(std::move(item))) return false;
            }
            J& part = part_of(items_.back());
            part["text"] = part["text"].get<std::string>() + d.text;
            J e = {{"item_id", items_.back()["id"]},
                   {"output_index", items_.size() - 1},
                   {"content_index", 0},
                   {"delta", d.text}};
            if (!reasoning) e["logprobs"] = J::array();
            return event(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", std::move(e));
        }
        case chat::Delta::kToolCall: {
            // a call id of its own (the model's functions.NAME:N repeats from turn to turn)
            if (std::find(custom_tools_.begin(), custom_tools_.end(), d.call.name) != custom_tools_.end()) {
                // a custom tool: its raw input, the call's one argument (the text as it came if not)
                const J args = J::parse(d.call.arguments, nullptr, false);
                const std::string input = args.is_object() && args.contains("input") && args["input"].is_string()
                    ? args["input"].get<std::string>()
                    : d.call.arguments;
                if (!open({{"id", random_id("ctc_")},
                           {"type", "custom_tool_call"},
                           {"status", "in_progress"},
                           {"call_id", random_id("call_")},
                           {"name", d.call.name},
                           {"input", ""}}))
                    return false;
                items_.back()["input"] = input;
                return event(
                           "response.custom_tool_call_input.delta",
                           {{"item_id", items_.back()["id"]}, {"output_index", items_.size() - 1}, {"delta", input}}) &&
                    close();
            }
            if (!open({{"id", random_id("fc_")},
                       {"type", "function_call"},
                       {"status", "in_progress"},
                       {"call_id", random_id("call_")},
                       {"name", d.call.name},
                       {"arguments", ""}}))
                return false;
            items_.back()["arguments"] = d.call.arguments;
            return event("response.function_call_arguments.delta",
                         {{"item_id", items_.back()["id"]},
                          {"output_index", items_.size() - 1},
                          {"delta", d.call.arguments}}) &&
                close();
        }
    }
    return true;
}

J ResponsesReply::response(const ChatOutcome& o) const {
    const bool cut = o.finish == FinishReason::kLength;
    J r = object(cut ? "incomplete" : "completed");
    J& out = r["output"];
    for (size_t i = 0; i < out.size(); ++i) {   // a message cut by max_output_tokens is incomplete
        if (out[i].contains("status")) out[i]["status"] = cut && i + 1 == out.size() ? "incomplete" : "completed";
        if (encrypted_reasoning_ && out[i]["type"] == "reasoning" && !out[i].contains("encrypted_content"))
            out[i]["encrypted_content"] = reasoning_token(out[i]["content"][0]["text"].get<std::string>());
    }
    if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    // (no output_tokens_details.reasoning_tokens: the format's parser splits text, not tokens)
    r["usage"] = {{"input_tokens", o.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", o.cached_tokens}}},
                  {"output_tokens", o.completion_tokens},
                  {"total_tokens", o.prompt_tokens + o.completion_tokens}};
    return r;
}

bool ResponsesReply::finish(const ChatOutcome& o) {
    return close(o.finish == FinishReason::kLength ? "incomplete" : "completed") &&
        event("response.completed", {{"response", response(o)}});
}

J ResponsesReply::as_chat_messages() const {
    J m = {{"role", "assistant"}, {"content", ""}};
    for (const J& item : items_) {
        const std::string type = item["type"];
        if (type == "reasoning") {
            m["reasoning_content"] =
                m.value("reasoning_content", std::string()) + item["content"][0]["text"].get<std::string>();
        } else if (type == "message") {
            m["content"] = m["content"].get<std::string>() + item["content"][0]["text"].get<std::string>();
        } else {   // function_call, custom_tool_call (its input the one argument)
            if (!m.contains("tool_calls")) m["tool_calls"] = J::array();
            const J args = type == "function_call" ? item["arguments"] : J(J{{"input", item["input"]}}.dump());
            m["tool_calls"].push_back({{"id", item["call_id"]},
                                       {"type", "function"},
                                       {"function", {{"name", item["name"]}, {"arguments", args}}}});
        }
    }
    return J::array({std::move(m)});
}

std::string ResponsesReply::error_event(const ApiError& e) {
    J d = {{"type", "error"},
           {"code", e.code.empty() ? J(nullptr) : J(e.code)},
           {"message", e.what()},
           {"param", nullptr}};
    return "event: error\ndata: " + d.dump(-1, ' ', false, J::error_handler_t::replace) + "\n\n";
}

}   // namespace kimi::server
