// The Kimi special-token table (K2 family / Kimi Linear tokenizer_config.json), as offsets
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

}  // namespace kimi::tok
