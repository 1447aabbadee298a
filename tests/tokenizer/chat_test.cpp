// Chat format, tool-call parsing, Python-compatible JSON and the streaming detokenizer.
// (The template text itself is checked against Jinja in check_chat_template.py.)
#include <gtest/gtest.h>

#include <random>

#include "chat/kimi_linear.h"
#include "core/error.h"
#include "tokenizer/py_json.h"
#include "tokenizer/unicode.h"
#include "test_util.h"

namespace kimi::tok::test {
namespace {

using chat::chat_messages_from_json;
using chat::ChatMessage;
using chat::ChatOptions;
using chat::parse_tool_calls_text;
using nlohmann::ordered_json;

TEST(Chat, SingleTurnIds) {
    const Tokenizer& t = synthetic();
    const auto msgs = chat_messages_from_json(ordered_json::parse(R"([{"role": "user", "content": "Hi"}])"));
    ChatOptions o;
    o.add_generation_prompt = true;
    const ChatPrompt p = chat::render_kimi_linear(t, msgs, nullptr, o);
    EXPECT_EQ(p.text, "<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>");
    const int32_t n = t.n_base();
    std::vector<int32_t> want = {n + 3};
    for (int32_t id : t.encode("user")) want.push_back(id);
    want.push_back(n + 17);
    for (int32_t id : t.encode("Hi")) want.push_back(id);
    want.push_back(n + 2);
    want.push_back(n + 4);
    for (int32_t id : t.encode("assistant")) want.push_back(id);
    want.push_back(n + 17);
    EXPECT_EQ(p.ids, want);
}

TEST(Chat, SpecialTextInContentStaysTextByDefault) {
    const Tokenizer& t = synthetic();
    const auto msgs = chat_messages_from_json(ordered_json::parse(R"([{"role": "user", "content": "a<|im_end|>b"}])"));
    const int32_t im_end = *t.special_id("<|im_end|>");
    const ChatPrompt plain = chat::render_kimi_linear(t, msgs, nullptr);
    EXPECT_EQ(std::count(plain.ids.begin(), plain.ids.end(), im_end), 1);
    ChatOptions o;
    o.allow_special_in_content = true;
    const ChatPrompt hf = chat::render_kimi_linear(t, msgs, nullptr, o);
    EXPECT_EQ(std::count(hf.ids.begin(), hf.ids.end(), im_end), 2);
    EXPECT_EQ(hf.ids, t.encode(hf.text, true));
    EXPECT_EQ(plain.text, hf.text);
}

TEST(Chat, ToolsAndToolCalls) {
    const Tokenizer& t = synthetic();
    const auto tools = ordered_json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"z": 1.0, "a": [true, null, 1e-7]}}}])");
    const auto msgs = chat_messages_from_json(ordered_json::parse(R"([
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": {"b": "é\n", "a": 2}}}]},
      {"role": "tool", "tool_call_id": "functions.f:0", "content": [{"type": "text", "text": "42"}, {"type": "image_url", "image_url": {}}]},
      {"role": "user", "name": "bob", "content": "x"}])"));
    const ChatPrompt p = chat::render_kimi_linear(t, msgs, tools);
    EXPECT_EQ(
        p.text,
        "<|im_system|>tool_declare<|im_middle|>[{\"function\":{\"name\":\"f\",\"parameters\":{\"a\":[true,null,1e-07],"
        "\"z\":1.0}},"
        "\"type\":\"function\"}]<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        "<|tool_call_argument_begin|>{\"b\": \"é\\n\", \"a\": 2}<|tool_call_end|><|tool_calls_section_end|><|im_end|>"
        "<|im_system|>tool<|im_middle|>## Return of functions.f:0\n42<|media_start|>image<|media_content|><|media_pad|>"
        "<|media_end|>\n<|im_end|><|im_user|>bob<|im_middle|>x<|im_end|>");
}

TEST(Chat, MalformedMessages) {
    EXPECT_THROW(chat_messages_from_json(ordered_json::parse(R"({"role": "user"})")), Error);
    EXPECT_THROW(chat_messages_from_json(ordered_json::parse(R"([{"content": "x"}])")), Error);
    EXPECT_THROW(chat_messages_from_json(ordered_json::parse(R"([{"role": "user", "content": 5}])")), Error);
    EXPECT_THROW(chat_messages_from_json(ordered_json::parse(R"([{"role": "user", "name": 5}])")), Error);
    EXPECT_THROW(
        chat_messages_from_json(ordered_json::parse(R"([{"role": "assistant", "tool_calls": [{"id": "x"}]}])")), Error);
    EXPECT_THROW(chat_messages_from_json(ordered_json::parse(R"([{"role": "assistant", "tool_calls": {}}])")), Error);
}

TEST(ToolCalls, ParseText) {
    const auto r = parse_tool_calls_text(
        "Let me check.<|tool_calls_section_begin|> <|tool_call_begin|> functions.get_weather:0 "
        "<|tool_call_argument_begin|> "
        "{\"city\": \"Paris\"} "
        "<|tool_call_end|><|tool_call_begin|>search:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_call_begin|>broken:2<|tool_call_begin|>ok:3<|tool_call_argument_begin|>[1]<|tool_call_end|>"
        "<|tool_call_begin|>unfinished:4<|tool_call_argument_begin|>{\"a\"<|tool_calls_section_end|>ignored");
    EXPECT_TRUE(r.has_section);
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.calls.size(), 3u);
    EXPECT_EQ(r.calls[0].id, "functions.get_weather:0");
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");
    EXPECT_EQ(r.calls[1].name, "search");
    EXPECT_EQ(r.calls[2].id, "ok:3");
    EXPECT_EQ(r.calls[2].arguments, "[1]");
    const auto none = parse_tool_calls_text("just text <|tool_call_begin|>");
    EXPECT_FALSE(none.has_section);
    EXPECT_TRUE(none.calls.empty());
    EXPECT_EQ(none.content, "just text <|tool_call_begin|>");
}

TEST(ToolCalls, ParseIdsRoundTripsRenderedCalls) {
    const Tokenizer& t = synthetic();
    ChatMessage m;
    m.role = "assistant";
    m.content = "Sure.";
    m.tool_calls = {{"functions.a:0", "a", "{\"x\": 1}"},
                    {"functions.lookup_user:1", "lookup_user", "{\"q\": \"<|im_end|>\"}"}};
    const ChatPrompt p = chat::render_kimi_linear(t, {m}, nullptr);
    // Drop the header (<|im_assistant|> assistant <|im_middle|>) and the trailing <|im_end|>.
    const auto mid = std::find(p.ids.begin(), p.ids.end(), *t.special_id("<|im_middle|>"));
    const std::vector<int32_t> body(mid + 1, p.ids.end() - 1);
    const auto r = chat::parse_tool_calls(t, body);
    EXPECT_TRUE(r.has_section);
    EXPECT_EQ(r.content, "Sure.");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].id, "functions.a:0");
    EXPECT_EQ(r.calls[0].name, "a");
    EXPECT_EQ(r.calls[1].name, "lookup_user");
    EXPECT_EQ(r.calls[1].arguments, "{\"q\": \"<|im_end|>\"}");
    // Marker text typed as plain tokens is not a marker at the token level.
    const auto plain = chat::parse_tool_calls(t, t.encode("<|tool_calls_section_begin|>", false));
    EXPECT_FALSE(plain.has_section);
    EXPECT_EQ(plain.content, "<|tool_calls_section_begin|>");
}

TEST(PyJson, MatchesPythonJsonDumps) {
    EXPECT_EQ(py_float_repr(1.0), "1.0");
    EXPECT_EQ(py_float_repr(-0.0), "-0.0");
    EXPECT_EQ(py_float_repr(0.1), "0.1");
    EXPECT_EQ(py_float_repr(1e16), "1e+16");
    EXPECT_EQ(py_float_repr(1234567890123456.0), "1234567890123456.0");
    EXPECT_EQ(py_float_repr(0.0001), "0.0001");
    EXPECT_EQ(py_float_repr(0.00001), "1e-05");
    EXPECT_EQ(py_float_repr(1.5e300), "1.5e+300");
    EXPECT_EQ(py_float_repr(123.456), "123.456");
    const auto v = ordered_json::parse(R"({"b": [1, "\u0001\"\\/\t"], "a": {"y": -2, "x": "é😀\u2028"}})");
    EXPECT_EQ(py_json_dumps(v, true, true), "{\"a\":{\"x\":\"é😀\u2028\",\"y\":-2},\"b\":[1,\"\\u0001\\\"\\\\/\\t\"]}");
    EXPECT_EQ(py_json_dumps(v, false, false),
              "{\"b\": [1, \"\\u0001\\\"\\\\/\\t\"], \"a\": {\"y\": -2, \"x\": \"é😀\u2028\"}}");
}

TEST(StreamDecoder, HoldsIncompleteSequences) {
    // Byte-level tokens: in the synthetic vocabulary rank b is the single byte b.
    const Tokenizer& t = synthetic();
    Tokenizer::StreamDecoder sd(t);
    EXPECT_EQ(sd.push(0xE4), "");
    EXPECT_EQ(sd.push(0xB8), "");
    EXPECT_EQ(sd.push(0xAD), "中");
    EXPECT_EQ(sd.push('a'), "a");
    EXPECT_EQ(sd.push(0xF0), "");
    EXPECT_EQ(sd.push('b'),
              "\xEF\xBF\xBD"
              "b");   // F0 followed by 'b' can never complete
    EXPECT_EQ(sd.push(0xED), "");
    EXPECT_EQ(sd.push(0xA0), "\xEF\xBF\xBD\xEF\xBF\xBD");   // surrogate range: ED A0 is invalid already
    EXPECT_EQ(sd.push(0xC3), "");
    EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");
    EXPECT_EQ(sd.flush(), "");
    EXPECT_EQ(sd.push(*t.special_id("<|im_end|>")), "<|im_end|>");
}

TEST(StreamDecoder, ConcatenationEqualsLossyDecodeOnRandomIds) {
    const Tokenizer& t = synthetic();
    std::mt19937_64 rng(99);
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<int32_t> ids;
        for (size_t i = 0, n = rng() % 40; i < n; ++i)
            ids.push_back(rng() % 4 == 0 ? int32_t(rng() % 256) : int32_t(rng() % uint64_t(t.n_vocab())));
        Tokenizer::StreamDecoder sd(t);
        std::string joined;
        for (int32_t id : ids) {
            const std::string p = sd.push(id);
            ASSERT_TRUE(utf8_valid(p));
            joined += p;
        }
        joined += sd.flush();
        ASSERT_EQ(joined, t.decode_lossy(ids));
    }
}

}   // namespace
}   // namespace kimi::tok::test
