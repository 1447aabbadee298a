// The Anthropic Messages API's reply (docs/server.md#anthropic): the message object with its
// content blocks (thinking, text, tool_use), stop_reason / stop_sequence and usage; or, when
// streamed, its server-sent events in Anthropic's order: message_start, then per block
// content_block_start, content_block_delta (thinking_delta, text_delta, input_json_delta),
// content_block_stop, then message_delta and message_stop, with ping while nothing comes.
// message_start goes out with the reply's first piece, once the engine has admitted the request
// and knows how much of the prompt the prefix cache served: its usage then says what
// message_delta's says (input_tokens the uncached part, cache_read_input_tokens the rest).
// Until then SSE comments keep the connection alive.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "server/api_error.h"
#include "server/openai_generate.h"

namespace kimi::server {

class MessagesReply {
public:
    using Write = std::function<bool(const std::string&)>;   // false: the client went away
    // write: the stream's sink; null for a reply answered in one body.
    MessagesReply(std::string model, std::vector<std::string> stop_sequences, Write write = nullptr);

    bool start(int64_t prompt_tokens);   // streamed: the stream opens (an SSE comment)
    // streamed: message_start (once; later calls do nothing) with the prompt tokens the prefix
    // cache served, then a ping. Before the first add().
    bool begin(int64_t cached_tokens);
    bool begun() const { return begun_; }
    bool add(const chat::Delta& piece);   // the next piece of the reply
    bool ping();                          // streamed: a ping event (before begin: an SSE comment)
    bool finish(const ChatOutcome& o);    // streamed: the open block's stop, message_delta, message_stop
    nlohmann::ordered_json message(const ChatOutcome& o) const;   // the whole message

    // An error inside a stream whose head already went out: an `error` event.
    static std::string error_event(const ApiError& e);

private:
    bool event(const char* name, const nlohmann::ordered_json& data);
    bool open(const nlohmann::ordered_json& block);   // closes the open block, opens this one
    bool close();

    std::string id_, model_;
    std::vector<std::string> stops_;
    Write write_;
    std::vector<nlohmann::ordered_json> blocks_;
    bool block_open_ = false;
    bool begun_ = false;
    int64_t prompt_tokens_ = 0;
};

// usage in Anthropic's terms: input_tokens are those the prefix cache did not serve.
nlohmann::ordered_json messages_usage(const ChatOutcome& o);

}   // namespace kimi::server
