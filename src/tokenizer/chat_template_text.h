// The Kimi Linear chat template (Jinja text) written into tokenizer_config.json by the
// synthetic tokenizer writer and used by the tests as the reference that
// src/chat/kimi_linear_render.cpp mirrors.
#pragma once

namespace kimi::tok {

// Lines 1-25 follow what is known of Kimi-Linear-48B-A3B-Instruct's chat_template.jinja
// (render_content macro, compact tools declaration, role_name = name or role, no default
// system prompt); the rest follows the Kimi-K2 family templates (see docs/tokenizer.md).
extern const char* const kKimiLinearChatTemplate;

}   // namespace kimi::tok
