// libFuzzer target: both chat formats (src/chat) — the renderers on fuzzed conversations and
// the output parsers on fuzzed generated text — with the synthetic tokenizers in each layout.
// Input: byte 0 picks the mode (bits 0-1) and options (bit 2: allow_special_in_content for a
// render, thinking for the K3 parser); byte 1 is the parsers' chunk size; the rest is the text.
//   0  Kimi Linear render: a messages array, or a request body {messages, tools,
//      add_generation_prompt}, rendered both through chat_messages_from_json +
//      render_kimi_linear and through the ChatFormat interface
//   1  K3 render: a request body (chat_request_from_body, as the server renders it)
//   2  Kimi Linear output parser (streamed in chunks and whole), and its tool-call section
//      parsed by the text-level and the token-level parsers
//   3  K3 output parser (streamed in chunks and whole)
// JSON is parsed as the server parses a request body (nesting ≤ kMaxJsonDepth, linear parser).
// Checked beyond "no crash": a rendered prompt's ids decode to its text, all in range; the
// parsed message is the same for any chunking; the streamed deltas add up to the message;
// Kimi Linear's text- and token-level tool-call parsers agree on valid UTF-8.
// Clean errors: kimi::Error (renderers refusing a conversation).
#include <string>
#include <vector>

#include "chat/chat_format.h"
#include "chat/chat_json.h"
#include "chat/kimi_linear.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "core/json_linear.h"
#include "fuzz_util.h"
#include "tokenizer/unicode.h"

namespace {

using J = nlohmann::ordered_json;
using namespace kimi::chat;
using kimi::fuzz::Input;
using kimi::tok::Tokenizer;

struct Formats {
    std::unique_ptr<ChatFormat> kimi_linear = chat_format_for(kimi::fuzz::kimi_linear_tokenizer());
    std::unique_ptr<ChatFormat> k3 = chat_format_for(kimi::fuzz::k3_tokenizer());
};

const Formats& formats() {
    static const Formats f;
    return f;
}

// The text as the server would parse a body; nullopt if it would refuse it.
std::optional<J> parse_json(std::string_view text) {
    if (!kimi::json_depth_within(text)) return std::nullopt;
    try {
        return kimi::parse_json_linear(text);
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

void check_prompt(const Tokenizer& tok, const kimi::tok::ChatPrompt& p) {
    for (int32_t id : p.ids) fuzz_assert(id >= 0 && id < tok.n_vocab(), "prompt id out of range");
    fuzz_assert(tok.decode(p.ids) == p.text, "prompt ids do not decode to its text");
}

void render_kimi_linear_mode(const J& j, bool allow_special) {
    const Tokenizer& tok = kimi::fuzz::kimi_linear_tokenizer();
    const J& messages = j.is_object() && j.contains("messages") ? j["messages"] : j;
    const J tools = j.is_object() && j.contains("tools") ? j["tools"] : J();
    ChatOptions opts;
    opts.allow_special_in_content = allow_special;
    if (j.is_object())
        if (auto it = j.find("add_generation_prompt"); it != j.end() && it->is_boolean())
            opts.add_generation_prompt = it->get<bool>();
    try {
        check_prompt(tok, render_kimi_linear(tok, chat_messages_from_json(messages), tools, opts));
    } catch (const kimi::Error& e) {
        kimi::fuzz::note_refusal(e.what());
    }
    if (!j.is_object()) return;
    try {
        ChatRequest r = chat_request_from_body(j);
        r.allow_special_in_content = allow_special;
        check_prompt(tok, formats().kimi_linear->render(r));
    } catch (const kimi::Error& e) {
        kimi::fuzz::note_refusal(e.what());
    }
}

void render_k3_mode(const J& j, bool allow_special) {
    try {
        ChatRequest r = chat_request_from_body(j);
        r.allow_special_in_content = allow_special;
        check_prompt(kimi::fuzz::k3_tokenizer(), formats().k3->render(r));
    } catch (const kimi::Error& e) {
        kimi::fuzz::note_refusal(e.what());
    }
}

struct Parsed {
    AssistantMessage msg;
    std::string reasoning, content;   // the deltas joined
    std::vector<ToolCallOut> calls;
};

Parsed run_parser(const ChatFormat& f, bool thinking, std::string_view text, size_t chunk) {
    auto p = f.new_parser(thinking);
    std::vector<Delta> ds;
    for (size_t at = 0; at < text.size(); at += chunk) p->push(text.substr(at, chunk), ds);
    p->finish(ds);
    Parsed r{p->message(), {}, {}, {}};
    for (const Delta& d : ds) {
        (void)delta_json(d);
        if (d.kind == Delta::kReasoning)
            r.reasoning += d.text;
        else if (d.kind == Delta::kContent)
            r.content += d.text;
        else
            r.calls.push_back(d.call);
    }
    (void)merge_deltas(ds);
    return r;
}

std::string calls_text(const std::vector<ToolCallOut>& cs) {
    std::string s;
    for (const ToolCallOut& c : cs) s += "[" + c.id + "|" + c.name + "|" + c.arguments + "]";
    return s;
}

void parse_mode(const ChatFormat& f, bool thinking, std::string_view text, size_t chunk) {
    const Parsed whole = run_parser(f, thinking, text, std::max<size_t>(text.size(), 1));
    const Parsed parts = run_parser(f, thinking, text, chunk);
    const std::string a = message_json(whole.msg).dump(-1, ' ', false, J::error_handler_t::replace);
    const std::string b = message_json(parts.msg).dump(-1, ' ', false, J::error_handler_t::replace);
    fuzz_assert(
        a == b,
        "the message depends on the chunking (chunk " + std::to_string(chunk) + ")\nwhole:  " + a + "\nchunks: " + b);
    for (const Parsed* p : {&whole, &parts}) {
        fuzz_assert(p->content == p->msg.content.value_or(""), "content deltas != message content");
        fuzz_assert(p->reasoning == p->msg.reasoning_content.value_or(""), "reasoning deltas != message reasoning");
        fuzz_assert(calls_text(p->calls) == calls_text(p->msg.tool_calls), "tool-call deltas != message tool calls");
    }
}

void tool_call_parsers(std::string_view text) {
    const ParsedToolCalls by_text = parse_tool_calls_text(text);
    const Tokenizer& tok = kimi::fuzz::kimi_linear_tokenizer();
    const ParsedToolCalls by_ids = parse_tool_calls(tok, tok.encode(text, true));
    if (!kimi::tok::utf8_valid(text)) return;
    fuzz_assert(by_text.has_section == by_ids.has_section, "tool-call parsers disagree on the section");
    fuzz_assert(by_text.content == by_ids.content, "tool-call parsers disagree on the content");
    fuzz_assert(calls_text(by_text.calls) == calls_text(by_ids.calls),
                "tool-call parsers disagree on the calls\ntext: " + calls_text(by_text.calls) +
                    "\nids:  " + calls_text(by_ids.calls));
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.byte();
    const size_t chunk = size_t(in.byte() % 64) + 1;
    const std::string_view text = in.rest();
    const bool flag = mode & 4;
    switch (mode & 3) {
        case 0:
            if (auto j = parse_json(text)) render_kimi_linear_mode(*j, flag);
            break;
        case 1:
            if (auto j = parse_json(text)) render_k3_mode(*j, flag);
            break;
        case 2:
            parse_mode(*formats().kimi_linear, true, text, chunk);
            tool_call_parsers(text);
            break;
        default: parse_mode(*formats().k3, flag, text, chunk); break;
    }
    return 0;
}
