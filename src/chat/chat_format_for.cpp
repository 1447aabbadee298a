// chat_format_for (chat_format.h): the conversation format a tokenizer calls for. Kimi-K3's
// XTML when the tokenizer has all four of its markers, the Kimi Linear <|im_…|> format otherwise.
#include "chat/chat_format.h"
#include "chat/k3_format.h"
#include "chat/kimi_linear.h"

namespace kimi::chat {

std::unique_ptr<ChatFormat> chat_format_for(const tok::Tokenizer& t) {
    for (const char* m : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"})
        if (!t.special_id(m)) return kimi_linear_format(t);
    return std::make_unique<K3Format>(t);
}

}   // namespace kimi::chat
