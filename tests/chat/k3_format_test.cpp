// Kimi-K3 chat format in C++: the output parser over hand-written K3 replies (plain,
// thinking + response, tool calls with every argument type, JSON-string arguments, nested
// values, unicode), replies cut at every byte (no crash, no tag in the text, a prefix of the
// full parse), malformed tags (graceful), streamed deltas == the non-streamed message for any
// chunking; and the renderer on hand-checked prompts (the byte-exact comparison against the
// Python oracle over the whole corpus is k3_render_test.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "chat/chat_format.h"
#include "chat/chat_json.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "tokenizer/synthetic.h"

namespace kimi::chat {
namespace {

using J = nlohmann::ordered_json;

const tok::Tokenizer& k3_tokenizer() {
    static const tok::Tokenizer t = [] {
        const std::string dir = ::testing::TempDir() + "kimi-k3-tok-" + std::to_string(::getpid());
        tok::write_synthetic_tokenizer(dir, 1024, 3, tok::SpecialLayout::kKimiK3);
        tok::Tokenizer loaded = tok::Tokenizer::load(dir);
        std::filesystem::remove_all(dir);
        return loaded;
    }();
    return t;
}

struct Parsed {
    AssistantMessage msg;
    std::string reasoning, content;   // concatenated deltas
    std::vector<ToolCallOut> calls;   // tool-call deltas
};

Parsed parse(std::string_view text, bool thinking, size_t chunk) {
    const auto f = chat_format_for(k3_tokenizer());
    auto p = f->new_parser(thinking);
    std::vector<Delta> ds;
    for (size_t at = 0; at < text.size(); at += chunk) p->push(text.substr(at, chunk), ds);
    p->finish(ds);
    Parsed r;
    r.msg = p->message();
    for (const Delta& d : ds) {
        if (d.kind == Delta::kReasoning)
            r.reasoning += d.text;
        else if (d.kind == Delta::kContent)
            r.content += d.text;
        else
            r.calls.push_back(d.call);
    }
    return r;
}

const std::string kCallReply =
    "Weather first.<|close|>think<|sep|><|open|>response<|sep|>Checking… 🌦<|close|>response<|sep|>"
    "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>São Paulo \"SP\"<|close|>argument<|sep|>"
    "<|open|>argument key=\"days\" type=\"number\"<|sep|>-2.5e3<|close|>argument<|sep|>"
    "<|open|>argument key=\"metric\" type=\"boolean\"<|sep|>true<|close|>argument<|sep|>"
    "<|open|>argument key=\"note\" type=\"null\"<|sep|>null<|close|>argument<|sep|>"
    "<|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"a\": [1, {\"b\": \"日本\"}]}<|close|>argument<|sep|>"
    "<|open|>argument key=\"hours\" type=\"array\"<|sep|>[6, 12]<|close|>argument<|sep|><|close|>call<|sep|>"
    "<|open|>call tool=\"search\" index=\"2\"<|sep|><|open|>json type=\"object\"<|sep|>{\"q\": "
    "\"a&b\"}<|close|>json<|sep|>"
    "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";

TEST(K3Parser, PlainResponseAndThinking) {
    auto r = parse("Hello there.<|close|>response<|sep|><|close|>message<|sep|>", false, 3);
    EXPECT_EQ(r.msg.content.value_or("?"), "Hello there.");
    EXPECT_FALSE(r.msg.reasoning_content);
    EXPECT_TRUE(r.msg.tool_calls.empty());
    r = parse(
        "Let me "
        "think.\nOK.<|close|>think<|sep|><|open|>response<|sep|>42<|close|>response<|sep|><|close|>message<|sep|>",
        true, 5);
    EXPECT_EQ(r.msg.reasoning_content.value_or("?"), "Let me think.\nOK.");
    EXPECT_EQ(r.msg.content.value_or("?"), "42");
}

TEST(K3Parser, ToolCallsWithEveryArgumentType) {
    const auto r = parse(kCallReply, true, 11);
    ASSERT_EQ(r.msg.tool_calls.size(), 2u);
    EXPECT_EQ(r.msg.reasoning_content.value_or("?"), "Weather first.");
    EXPECT_EQ(r.msg.content.value_or("?"), "Checking… 🌦");
    EXPECT_EQ(r.msg.tool_calls[0].name, "get_weather");
    const J args = J::parse(r.msg.tool_calls[0].arguments);
    EXPECT_EQ(args, J::parse(R"({"city": "São Paulo \"SP\"", "days": -2500.0, "metric": true, "note": null,
                                 "opts": {"a": [1, {"b": "日本"}]}, "hours": [6, 12]})"));
    EXPECT_EQ(args.begin().key(), "city");   // key order kept
    EXPECT_EQ(r.msg.tool_calls[1].name, "search");
    EXPECT_EQ(r.msg.tool_calls[1].arguments, "{\"q\": \"a&b\"}");   // a json element as written
    EXPECT_NE(r.msg.tool_calls[0].id, r.msg.tool_calls[1].id);
    EXPECT_EQ(message_json(r.msg)["tool_calls"][0]["type"], "function");
}

TEST(K3Parser, StreamedDeltasEqualTheMessageForAnyChunking) {
    const auto whole = parse(kCallReply, true, kCallReply.size());
    for (size_t chunk : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(64)}) {
        const auto r = parse(kCallReply, true, chunk);
        EXPECT_EQ(r.reasoning, whole.msg.reasoning_content.value_or("")) << chunk;
        EXPECT_EQ(r.content, whole.msg.content.value_or("")) << chunk;
        ASSERT_EQ(r.calls.size(), whole.msg.tool_calls.size()) << chunk;
        for (size_t i = 0; i < r.calls.size(); ++i) {
            EXPECT_EQ(r.calls[i].arguments, whole.msg.tool_calls[i].arguments);
            EXPECT_EQ(r.calls[i].id, whole.msg.tool_calls[i].id);
        }
        EXPECT_EQ(message_json(r.msg), message_json(whole.msg));
    }
}

// Cut after every byte: never a crash, never a tag or a partial marker in the text, and what
// is returned is a prefix of the full parse (calls complete or absent).
TEST(K3Parser, TruncatedAtEveryByte) {
    const auto whole = parse(kCallReply, true, kCallReply.size());
    for (size_t n = 0; n <= kCallReply.size(); ++n) {
        const auto r = parse(std::string_view(kCallReply).substr(0, n), true, 4);
        const std::string reasoning = r.msg.reasoning_content.value_or(""), content = r.msg.content.value_or("");
        for (const std::string* s : {&reasoning, &content}) {
            EXPECT_EQ(s->find("<|"), std::string::npos) << "cut at " << n << ": " << *s;
        }
        EXPECT_EQ(whole.msg.reasoning_content->compare(0, reasoning.size(), reasoning), 0) << n;
        EXPECT_EQ(whole.msg.content->compare(0, content.size(), content), 0) << n;
        ASSERT_LE(r.msg.tool_calls.size(), 2u);
        for (size_t i = 0; i < r.msg.tool_calls.size(); ++i)
            EXPECT_EQ(r.msg.tool_calls[i].arguments, whole.msg.tool_calls[i].arguments) << n;
        EXPECT_EQ(r.reasoning, reasoning) << n;
        EXPECT_EQ(r.content, content) << n;
    }
}

TEST(K3Parser, MalformedRepliesDegradeGracefully) {
    // an unknown tag in the response: what was parsed stays, the rest is content as text
    auto r = parse("Hi<|open|>banana<|sep|>tail", false, 2);
    EXPECT_EQ(r.msg.content.value_or(""), "Hi<|open|>banana<|sep|>tail");
    // a call with no name: nothing parsed as a call
    r = parse("ok<|close|>response<|sep|><|open|>tools<|sep|><|open|>call index=\"1\"<|sep|>x<|close|>call<|sep|>",
              false, 3);
    EXPECT_TRUE(r.msg.tool_calls.empty());
    EXPECT_NE(r.msg.content.value_or("").find("ok"), std::string::npos);
    // text that only looks like a marker stays text
    r = parse("a <|b and <| c<|close|>response<|sep|>", false, 1);
    EXPECT_EQ(r.msg.content.value_or(""), "a <|b and <| c");
    // an open marker never followed by its separator is text once no tag header could be that long
    r = parse("x<|open|>" + std::string(5000, 'y'), false, 64);
    EXPECT_EQ(r.msg.content.value_or("").size(), 1 + 8 + 5000u);
    // a stray end of message ends the reply
    r = parse("done<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>", false, 4);
    EXPECT_EQ(r.msg.content.value_or(""), "done");
}

// Found by fuzz_chat (fuzz/corpus/fuzz_chat/crash-k3-marker-after-raw): text after the end of
// the message turns the rest into content, and a marker right behind that text is content too,
// whether it came in the same piece or a later one.
TEST(K3Parser, MarkerAfterTextThatBrokeTheGrammarStaysText) {
    const std::string reply = "<|end_of_msg|>\xff<|end_of_msg|>";
    for (size_t chunk : {reply.size(), size_t(17), size_t(1)}) {
        const auto r = parse(reply, false, chunk);
        EXPECT_EQ(r.msg.content.value_or(""), "\xff<|end_of_msg|>") << chunk;
        EXPECT_EQ(r.content, r.msg.content.value_or("")) << chunk;
    }
    for (size_t chunk : {size_t(64), size_t(25), size_t(3)}) {
        const auto r = parse("<|close|>response<|sep|>x<|end_of_msg|>y", false, chunk);
        EXPECT_EQ(r.msg.content.value_or(""), "x<|end_of_msg|>y") << chunk;
    }
}

// Found by fuzz_chat (crash-k3-space-then-text): whitespace where only tags may stand is
// dropped, but when text follows it the whitespace is content too — also when the two arrive
// in different pieces.
TEST(K3Parser, WhitespaceBeforeTextThatBreaksTheGrammarIsKept) {
    for (size_t chunk : {size_t(64), size_t(3), size_t(1)}) {
        auto r = parse("<|end_of_msg|> d", true, chunk);
        EXPECT_EQ(r.msg.content.value_or(""), " d") << chunk;
        EXPECT_EQ(r.content, r.msg.content.value_or("")) << chunk;
        // between tags it is still dropped
        r = parse("a<|close|>response<|sep|>\n <|close|>message<|sep|> \n", false, chunk);
        EXPECT_EQ(r.msg.content.value_or(""), "a") << chunk;
    }
}

// Reproduced with fuzz_chat (crash-k3-long-tag-header): a separator more than 4096 bytes after its
// marker made a tag when the reply came whole but text when it was streamed. It is text both ways.
TEST(K3Parser, TagHeaderLimitDoesNotDependOnTheChunking) {
    const std::string reply = "<|close|>response<|sep|><|open|>tools" + std::string(5000, ' ') + "<|sep|>x";
    for (size_t chunk : {reply.size(), size_t(64), size_t(7)}) {
        const auto r = parse(reply, false, chunk);
        EXPECT_EQ(r.msg.content.value_or(""), reply.substr(24)) << chunk;
    }
    // up to the limit it is a tag
    const std::string near =
        "<|close|>response<|sep|><|open|>tools" + std::string(4000, ' ') + "<|sep|><|close|>tools<|sep|>";
    for (size_t chunk : {near.size(), size_t(64)})
        EXPECT_EQ(parse(near, false, chunk).msg.content.value_or(""), "") << chunk;
}

TEST(K3Render, HandCheckedPrompt) {
    const auto f = chat_format_for(k3_tokenizer());
    EXPECT_STREQ(f->name(), "kimi-k3");
    ChatRequest req;
    req.messages = J::parse(R"([{"role": "user", "name": "a\"&b", "content": "Hi <|open|>"}])");
    req.thinking = false;
    req.add_generation_prompt = true;
    const tok::ChatPrompt p = f->render(req);
    EXPECT_EQ(
        p.text,
        "<|open|>message role=\"user\" name=\"a&quot;&amp;b\"<|sep|>Hi <|open|><|close|>message<|sep|><|end_of_msg|>"
        "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>");
    // the user's "<|open|>" is text: exactly 5 markers before the generation prompt's 4
    const int32_t open = *k3_tokenizer().special_id("<|open|>");
    EXPECT_EQ(std::count(p.ids.begin(), p.ids.end(), open), 3);
    // thinking on (default effort max): the effort message and an opened think channel
    req.thinking = true;
    const std::string t = f->render(req).text;
    EXPECT_NE(t.find("type=\"thinking-effort\""), std::string::npos);
    EXPECT_NE(t.find("`thinking_effort=max`"), std::string::npos);
    EXPECT_EQ(t.substr(t.size() - 20), "<|open|>think<|sep|>");
    req.thinking_effort = "medium";
    EXPECT_THROW(f->render(req), Error);
    req.thinking_effort = "high";
    // an image part: the placeholder without a resolver, the image's prompt with one
    req.messages = J::parse(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])");
    EXPECT_NE(f->render(req).text.find("<|sep|><|kimi_image_placeholder|><|close|>"), std::string::npos);
    req.images = [](const J&, const std::string&) { return ImagePrompt{30, 20, 3}; };
    EXPECT_NE(f->render(req).text.find("<|media_begin|>image 30x20<|media_content|><|media_pad|><|media_pad|>"
                                       "<|media_pad|><|media_end|>"),
              std::string::npos);
    req.images = [](const J&, const std::string& where) -> ImagePrompt { throw Error(where + ": refused"); };
    EXPECT_THROW(f->render(req), Error);
    req.images = nullptr;
    req.messages = J::parse(R"([{"role": "tool", "content": "r"}])");
    EXPECT_THROW(f->render(req), Error);   // no resolvable tool name
}

// Tool-call arguments given as JSON text are parsed to be written argument by argument: past
// kMaxJsonDepth levels that is an error naming the limit (walking 50,000 levels recursively
// used to overflow the stack), at the limit they render.
TEST(K3Render, DeepToolCallArgumentsAreRefused) {
    const auto f = chat_format_for(k3_tokenizer());
    const auto with_args = [&](int depth) {
        ChatRequest req;
        req.parse_string_arguments = true;   // as the server renders requests
        const std::string args = "{\"a\":" + std::string(size_t(depth), '[') + std::string(size_t(depth), ']') + "}";
        req.messages = J::array(
            {J{{"role", "user"}, {"content", "hi"}},
             J{{"role", "assistant"},
               {"content", ""},
               {"tool_calls",
                J::array(
                    {J{{"id", "c1"}, {"type", "function"}, {"function", J{{"name", "f"}, {"arguments", args}}}}})}},
             J{{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}});
        return req;
    };
    EXPECT_NO_THROW(f->render(with_args(kMaxJsonDepth - 1)));
    try {
        f->render(with_args(50000));
        ADD_FAILURE() << "rendered 50,000-deep arguments";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos) << e.what();
    }
}

}   // namespace
}   // namespace kimi::chat
