// Parsing the model's native tool-call markers back into calls:
//   content <|tool_calls_section_begin|>
//     <|tool_call_begin|> ID <|tool_call_argument_begin|> ARGS <|tool_call_end|> ...
//   <|tool_calls_section_end|>
// The function name is ID.split(':')[0].split('.')[-1] (ID like "functions.get_weather:0"),
// ID and ARGS are stripped of surrounding whitespace, and an unfinished call is dropped —
// the rules of vLLM's kimi_k2 tool parser (vllm/entrypoints/openai/tool_parsers/kimi_k2_tool_parser.py),
// except that an ID without the ":N" suffix is accepted too.
#include "chat/kimi_linear.h"

namespace kimi::chat {
namespace {

constexpr std::string_view kSectionBegin = "<|tool_calls_section_begin|>";
constexpr std::string_view kSectionEnd = "<|tool_calls_section_end|>";
constexpr std::string_view kCallBegin = "<|tool_call_begin|>";
constexpr std::string_view kArgBegin = "<|tool_call_argument_begin|>";
constexpr std::string_view kCallEnd = "<|tool_call_end|>";

std::string_view strip(std::string_view s) {
    auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
    while (!s.empty() && ws(s.front())) s.remove_prefix(1);
    while (!s.empty() && ws(s.back())) s.remove_suffix(1);
    return s;
}

std::string function_name(std::string_view id) {
    std::string_view head = id.substr(0, id.find(':'));
    const size_t dot = head.rfind('.');
    if (dot != std::string_view::npos) head.remove_prefix(dot + 1);
    return std::string(head);
}

ToolCallOut make_call(std::string_view id, std::string_view args) {
    ToolCallOut c;
    c.id = std::string(strip(id));
    c.name = function_name(c.id);
    c.arguments = std::string(strip(args));
    return c;
}

bool valid_id(std::string_view id) { return !strip(id).empty() && id.find('<') == std::string_view::npos; }

}   // namespace

ParsedToolCalls parse_tool_calls_text(std::string_view text) {
    ParsedToolCalls r;
    const size_t sec = text.find(kSectionBegin);
    if (sec == std::string_view::npos) {
        r.content = std::string(text);
        return r;
    }
    r.has_section = true;
    r.content = std::string(text.substr(0, sec));
    std::string_view rest = text.substr(sec + kSectionBegin.size());
    const size_t sec_end = rest.find(kSectionEnd);
    if (sec_end != std::string_view::npos) rest = rest.substr(0, sec_end);
    size_t b = rest.find(kCallBegin);
    while (b != std::string_view::npos) {
        const size_t id_from = b + kCallBegin.size();
        const size_t next_begin = rest.find(kCallBegin, id_from);
        const size_t a = rest.find(kArgBegin, id_from);
        if (a == std::string_view::npos) break;
        if (next_begin < a) {   // this call never got its arguments: start again at the next one
            b = next_begin;
            continue;
        }
        const size_t args_from = a + kArgBegin.size();
        const size_t e = rest.find(kCallEnd, args_from);
        if (e == std::string_view::npos) break;
        if (next_begin < e) {   // arguments may not contain another call's begin marker
            b = next_begin;
            continue;
        }
        const std::string_view id = rest.substr(id_from, a - id_from);
        if (valid_id(id)) r.calls.push_back(make_call(id, rest.substr(args_from, e - args_from)));
        b = rest.find(kCallBegin, e + kCallEnd.size());
    }
    return r;
}

ParsedToolCalls parse_tool_calls(const tok::Tokenizer& t, std::span<const int32_t> ids) {
    auto special = [&](std::string_view m) { return t.special_id(m).value_or(-1); };
    const int32_t sec_begin = special(kSectionBegin), sec_end = special(kSectionEnd);
    const int32_t call_begin = special(kCallBegin), arg_begin = special(kArgBegin);
    const int32_t call_end = special(kCallEnd);
    ParsedToolCalls r;
    size_t i = 0;
    std::vector<int32_t> run;
    for (; i < ids.size() && (sec_begin < 0 || ids[i] != sec_begin); ++i) run.push_back(ids[i]);
    r.content = t.decode_lossy(run);
    if (i == ids.size()) return r;
    r.has_section = true;
    ++i;
    enum { kOutside, kInId, kInArgs } state = kOutside;
    std::vector<int32_t> id_ids, arg_ids;
    for (; i < ids.size(); ++i) {
        const int32_t id = ids[i];
        if (id == sec_end) break;
        if (id == call_begin) {   // a new call (an unfinished previous one is dropped)
            state = kInId;
            id_ids.clear();
            arg_ids.clear();
        } else if (id == arg_begin && state == kInId) {
            state = kInArgs;
        } else if (id == call_end && state == kInArgs) {
            const std::string call_id = t.decode_lossy(id_ids);
            if (valid_id(call_id)) r.calls.push_back(make_call(call_id, t.decode_lossy(arg_ids)));
            state = kOutside;
        } else if (state == kInId) {
            id_ids.push_back(id);
        } else if (state == kInArgs) {
            arg_ids.push_back(id);
        }
    }
    return r;
}

}   // namespace kimi::chat
