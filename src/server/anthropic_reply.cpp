// The Anthropic Messages reply and its events (see anthropic_reply.h).
// ref: docs/server.md#anthropic, Anthropic's Messages API and streaming references.
#include "server/anthropic_reply.h"

namespace kimi::server {
namespace {

using J = nlohmann::ordered_json;

const char* stop_reason(const ChatOutcome& o) {
    if (o.tool_calls) return "tool_use";
    if (o.finish == FinishReason::kLength) return "max_tokens";
    if (o.finish == FinishReason::kStop && o.stop_index >= 0) return "stop_sequence";
    return "end_turn";
}

J stop_sequence(const ChatOutcome& o, const std::vector<std::string>& stops) {
    if (o.tool_calls || o.finish != FinishReason::kStop || o.stop_index < 0 || size_t(o.stop_index) >= stops.size())
        return nullptr;
    return stops[size_t(o.stop_index)];
}

// A tool call's arguments as the tool_use block's input object ({} for text that is not one).
J tool_input(const std::string& arguments) {
    J in = J::parse(arguments, nullptr, false);
    return in.is_object() ? in : J::object();
}

}   // namespace

J messages_usage(const ChatOutcome& o) {
    return {{"input_tokens", o.prompt_tokens - o.cached_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", o.cached_tokens},
            {"output_tokens", o.completion_tokens}};
}

MessagesReply::MessagesReply(std::string model, std::vector<std::string> stop_sequences, Write write)
    : id_(random_id("msg_")), model_(std::move(model)), stops_(std::move(stop_sequences)), write_(std::move(write)) {}

bool MessagesReply::event(const char* name, const J& data) {
    if (!write_) return true;
    return write_(std::string("event: ") + name + "\ndata: " + data.dump(-1, ' ', false, J::error_handler_t::replace) +
                  "\n\n");
}

bool MessagesReply::start(int64_t prompt_tokens) {
    prompt_tokens_ = prompt_tokens;
    return !write_ || write_(": stream open\n\n");
}

bool MessagesReply::begin(int64_t cached_tokens) {
    if (begun_ || !write_) return true;
    begun_ = true;
    J msg = {{"id", id_},
             {"type", "message"},
             {"role", "assistant"},
             {"model", model_},
             {"content", J::array()},
             {"stop_reason", nullptr},
             {"stop_sequence", nullptr},
             {"usage",
              {{"input_tokens", prompt_tokens_ - cached_tokens},
               {"cache_creation_input_tokens", 0},
               {"cache_read_input_tokens", cached_tokens},
               {"output_tokens", 0}}}};
    return event("message_start", {{"type", "message_start"}, {"message", std::move(msg)}}) && ping();
}

bool MessagesReply::ping() {
    if (!begun_) return !write_ || write_(": ping\n\n");
    return event("ping", {{"type", "ping"}});
}

bool MessagesReply::close() {
    if (!block_open_) return true;
    block_open_ = false;
    return event("content_block_stop", {{"type", "content_block_stop"}, {"index", blocks_.size() - 1}});
}

bool MessagesReply::open(const J& block) {
    if (!close()) return false;
    blocks_.push_back(block);
    block_open_ = true;
    return event("content_block_start",
                 {{"type", "content_block_start"}, {"index", blocks_.size() - 1}, {"content_block", block}});
}

bool MessagesReply::add(const chat::Delta& d) {
    switch (d.kind) {
        case chat::Delta::kReasoning:
        case chat::Delta::kContent: {   // a thinking or a text block: its text grows by the piece
            if (d.text.empty()) return true;
            const bool thinking = d.kind == chat::Delta::kReasoning;
            const char* type = thinking ? "thinking" : "text";
            if ((!block_open_ || blocks_.back()["type"] != type) &&
                !open(thinking ? J{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                               : J{{"type", "text"}, {"text", ""}}))
                return false;
            J& text = blocks_.back()[type];
            text = text.get<std::string>() + d.text;
            return event("content_block_delta",
                         {{"type", "content_block_delta"},
                          {"index", blocks_.size() - 1},
                          {"delta", {{"type", thinking ? "thinking_delta" : "text_delta"}, {type, d.text}}}});
        }
        case chat::Delta::kToolCall: {
            // a unique id (the model's own, functions.NAME:N, repeats from turn to turn); the
            // request side renders the model's form again (anthropic_request.cpp)
            if (!open(
                    {{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", d.call.name}, {"input", J::object()}}))
                return false;
            const J input = tool_input(d.call.arguments);
            blocks_.back()["input"] = input;
            return event("content_block_delta",
                         {{"type", "content_block_delta"},
                          {"index", blocks_.size() - 1},
                          {"delta", {{"type", "input_json_delta"}, {"partial_json", input.dump()}}}}) &&
                close();
        }
    }
    return true;
}

bool MessagesReply::finish(const ChatOutcome& o) {
    return begin(o.cached_tokens) && close() &&
        event("message_delta",
              {{"type", "message_delta"},
               {"delta", {{"stop_reason", stop_reason(o)}, {"stop_sequence", stop_sequence(o, stops_)}}},
               {"usage", messages_usage(o)}}) &&
        event("message_stop", {{"type", "message_stop"}});
}

J MessagesReply::message(const ChatOutcome& o) const {
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", blocks_},
            {"stop_reason", stop_reason(o)},
            {"stop_sequence", stop_sequence(o, stops_)},
            {"usage", messages_usage(o)}};
}

std::string MessagesReply::error_event(const ApiError& e) {
    return "event: error\ndata: " + e.to_anthropic_json().dump(-1, ' ', false, J::error_handler_t::replace) + "\n\n";
}

}   // namespace kimi::server
