// The Kimi special-token tables (K2 family / Kimi Linear, and Kimi-K3), as offsets
// from n_base. Slots not listed are "<|reserved_token_{id}|>". The media ids are taken from
// third-party Kimi tables (unverified for Kimi Linear, see docs/tokenizer.md).
#pragma once
#include <cstdint>

namespace kimi::tok {

struct KimiSpecial {
    int32_t offset;
    const char* text;
    bool special;   // the config's "special" flag (false for the tool-call markers)
};

inline constexpr KimiSpecial kKimiSpecials[] = {
    {0, "[BOS]", true},
    {1, "[EOS]", true},
    {2, "<|im_end|>", true},
    {3, "<|im_user|>", true},
    {4, "<|im_assistant|>", true},
    {6, "<|start_header_id|>", true},
    {7, "<|end_header_id|>", true},
    {9, "[EOT]", true},
    {10, "<|im_system|>", true},
    {11, "<|tool_calls_section_begin|>", false},
    {12, "<|tool_calls_section_end|>", false},
    {13, "<|tool_call_begin|>", false},
    {14, "<|tool_call_argument_begin|>", false},
    {15, "<|tool_call_end|>", false},
    {17, "<|im_middle|>", true},
    {18, "<|media_start|>", true},
    {19, "<|media_content|>", true},
    {20, "<|media_end|>", true},
    {21, "<|media_pad|>", true},
    {254, "[UNK]", true},
    {255, "[PAD]", true},
};

// Kimi-K3 ("XTML" conversation format): the same ranks, with the structural markers in the
// first slots (ids 163585–163589 for the real tokenizer) and the media tokens of an image
// prompt (163602–163605; <|media_pad|> is config.json's media_placeholder_token_id).
inline constexpr KimiSpecial kK3Specials[] = {
    {0, "[BOS]", true},
    {1, "[EOS]", true},
    {2, "<|end_of_msg|>", true},
    {3, "<|open|>", true},
    {4, "<|close|>", true},
    {5, "<|sep|>", true},
    {18, "<|media_begin|>", true},
    {19, "<|media_content|>", true},
    {20, "<|media_end|>", true},
    {21, "<|media_pad|>", true},
    {254, "[UNK]", true},
    {255, "[PAD]", true},
};

}   // namespace kimi::tok
