// Kimi-K3's XTML conversation format: the renderer (k3_render.cpp) and the streaming output
// parser (k3_parser.cpp). ref: docs/chat.md#k3-format; K3 encoding_k3.py; llama.cpp
// Kimi-K3.jinja and common/parsers/kimi-k3.cpp.
#pragma once
#include "chat/chat_format.h"

namespace kimi::chat {

class K3Format : public ChatFormat {
public:
    explicit K3Format(const tok::Tokenizer& t) : tok_(t) {}
    const char* name() const override { return "kimi-k3"; }
    bool reasons() const override { return true; }
    tok::ChatPrompt render(const ChatRequest& r) const override;
    std::unique_ptr<OutputParser> new_parser(bool thinking) const override;

private:
    const tok::Tokenizer& tok_;
};

}   // namespace kimi::chat
