// The OpenAI Responses API's reply (docs/server.md#responses): the response object whose
// `output` holds, in the order the model produced them, reasoning items (K3's think channel as
// reasoning_text), message items (output_text) and function_call items; or, streamed, its
// events: response.created, response.in_progress, then per item response.output_item.added,
// the part and delta events (response.content_part.added, response.output_text.delta /
// response.reasoning_text.delta / response.function_call_arguments.delta /
// response.custom_tool_call_input.delta, their .done),
// response.output_item.done, and last response.completed, each with its sequence_number.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "server/api_error.h"
#include "server/openai_generate.h"

namespace kimi::server {

class ResponsesReply {
public:
    using Write = std::function<bool(const std::string&)>;   // false: the client went away
    // echo: the request fields the response object repeats (ResponsesRequest::echo).
    ResponsesReply(std::string model, nlohmann::ordered_json echo, Write write = nullptr);

    const std::string& id() const { return id_; }
    // include: ["reasoning.encrypted_content"]: each reasoning item, once done, carries its text
    // as encrypted_content (reasoning_token()).
    void set_encrypted_reasoning(bool on) { encrypted_reasoning_ = on; }
    // The request's custom (freeform) tools: a call to one is a custom_tool_call item whose
    // input is the call's `input` argument, raw.
    void set_custom_tools(std::vector<std::string> names) { custom_tools_ = std::move(names); }
    bool start();                         // streamed: response.created, response.in_progress
    bool add(const chat::Delta& piece);   // the next piece of the reply
    bool finish(const ChatOutcome& o);    // streamed: the open item's done events, response.completed
    nlohmann::ordered_json response(const ChatOutcome& o) const;   // the finished response object
    // The reply as the chat messages a later turn continues from (one assistant message).
    nlohmann::ordered_json as_chat_messages() const;

    // An error inside a stream whose head already went out: an `error` event.
    static std::string error_event(const ApiError& e);

private:
    nlohmann::ordered_json object(const char* status) const;   // the response object, output so far
    bool event(const char* type, nlohmann::ordered_json data);
    bool open(nlohmann::ordered_json item);         // closes the open item, adds this one
    bool close(const char* status = "completed");   // the open item's done events

    std::string id_, model_;
    nlohmann::ordered_json echo_;
    Write write_;
    int64_t created_at_ = 0, sequence_ = 0;
    std::vector<nlohmann::ordered_json> items_;
    bool item_open_ = false;
    bool encrypted_reasoning_ = false;
    std::vector<std::string> custom_tools_;
};

}   // namespace kimi::server
