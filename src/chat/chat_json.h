// The OpenAI JSON shapes of parsed output: the assistant message of a non-streamed response
// and the `delta` objects of a streamed one.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"

namespace kimi::chat {

// {"role": "assistant", "content", "reasoning_content", ["tool_calls": [{id, type, function}]]}
nlohmann::ordered_json message_json(const AssistantMessage& m);
// {"reasoning_content": …} | {"content": …} | {"tool_calls": [{index, id, type, function}]}
nlohmann::ordered_json delta_json(const Delta& d);
// Adjacent text deltas of the same kind joined (what one stream chunk may carry).
std::vector<Delta> merge_deltas(const std::vector<Delta>& ds);

}   // namespace kimi::chat
