// Loading errors and layout: malformed tiktoken.model / tokenizer_config.json must give a
// clear kimi::Error (never a crash); a valid directory gets Kimi's special layout.
#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace kimi::tok::test {
namespace {

// Expects Tokenizer::load(dir) to throw kimi::Error whose message contains `needle`.
void expect_load_error(const std::filesystem::path& dir, const std::string& needle) {
    try {
        Tokenizer::load(dir.string());
        ADD_FAILURE() << "load succeeded, expected an error containing '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
    }
}

std::filesystem::path dir_with(const std::string& name, const std::string& model, const std::string& config = "{}") {
    const auto dir = temp_dir(name);
    write_file(dir / "tiktoken.model", model);
    write_file(dir / "tokenizer_config.json", config);
    return dir;
}

TEST(TokenizerLoad, MissingFiles) {
    expect_load_error(temp_dir("empty-dir"), "tiktoken.model");
    const auto dir = temp_dir("no-config");
    write_file(dir / "tiktoken.model", byte_vocab());
    expect_load_error(dir, "tokenizer_config.json");
    expect_load_error(temp_dir("nonexistent") / "sub", "cannot open");
}

TEST(TokenizerLoad, CorruptModel) {
    expect_load_error(dir_with("empty-model", ""), "no tokens");
    expect_load_error(dir_with("bad-b64", byte_vocab() + "!!!! 256\n"), "invalid base64");
    expect_load_error(dir_with("bad-b64-pad", byte_vocab() + "YQ 256\n"), "invalid base64");
    expect_load_error(dir_with("bad-b64-mid", byte_vocab() + "Y=Q= 256\n"), "invalid base64");
    expect_load_error(dir_with("bad-rank", byte_vocab() + "YWI= x\n"), "invalid rank");
    expect_load_error(dir_with("neg-rank", byte_vocab() + "YWI= -1\n"), "invalid rank");
    expect_load_error(dir_with("huge-rank", byte_vocab() + "YWI= 99999999999999999999\n"), "invalid rank");
    expect_load_error(dir_with("three-fields", byte_vocab() + "YWI= 256 7\n"), "fields");
    expect_load_error(dir_with("one-field", byte_vocab() + "YWI=\n"), "fields");
    expect_load_error(dir_with("blank-spaces", byte_vocab() + "   \n"), "blank line");
    expect_load_error(dir_with("empty-token", byte_vocab() + " 256\n"), "fields");
    expect_load_error(dir_with("dup-rank", byte_vocab() + "YWI= 255\n"), "duplicate rank 255");
    expect_load_error(dir_with("dup-rank2", byte_vocab({"ab", "cd"}) + "ZWY= 257\n"), "duplicate rank 257");
    expect_load_error(dir_with("gap", byte_vocab() + "YWI= 300\n"), "not contiguous");
    expect_load_error(dir_with("dup-bytes", byte_vocab({"ab", "ab"})), "duplicate token bytes");
    std::string missing_byte;
    for (int b = 0; b < 256; ++b)
        missing_byte +=
            base64_encode(b == 65 ? std::string("zz") : std::string(1, char(b))) + " " + std::to_string(b) + "\n";
    expect_load_error(dir_with("missing-byte", missing_byte), "single byte 0x41");
}

TEST(TokenizerLoad, BadConfig) {
    const std::string model = byte_vocab();
    expect_load_error(dir_with("cfg-json", model, "{not json"), "invalid JSON");
    expect_load_error(dir_with("cfg-array", model, "[1,2]"), "JSON object");
    expect_load_error(dir_with("cfg-dec-type", model, R"({"added_tokens_decoder": 5})"), "added_tokens_decoder");
    expect_load_error(dir_with("cfg-key", model, R"({"added_tokens_decoder": {"abc": {"content": "x"}}})"),
                      "not a token id");
    expect_load_error(dir_with("cfg-range-lo", model, R"({"added_tokens_decoder": {"100": {"content": "x"}}})"),
                      "outside the special range");
    expect_load_error(dir_with("cfg-range-hi", model, R"({"added_tokens_decoder": {"514": {"content": "x"}}})"),
                      "outside the special range");
    expect_load_error(dir_with("cfg-content", model, R"({"added_tokens_decoder": {"256": {"special": true}}})"),
                      "content");
    expect_load_error(dir_with("cfg-empty", model, R"({"added_tokens_decoder": {"256": {"content": ""}}})"),
                      "empty content");
    expect_load_error(dir_with("cfg-dup", model,
                               R"({"added_tokens_decoder": {"256": {"content": "[A]"}, "257": {"content": "[A]"}}})"),
                      "used for two ids");
    expect_load_error(dir_with("cfg-dup-reserved", model,
                               R"({"added_tokens_decoder": {"256": {"content": "<|reserved_token_300|>"}}})"),
                      "used for two ids");
    expect_load_error(dir_with("cfg-bos", model, R"({"bos_token": "[NOPE]"})"), "bos_token '[NOPE]'");
    expect_load_error(dir_with("cfg-eos-type", model, R"({"eos_token": 3})"), "eos_token");
    expect_load_error(dir_with("cfg-template", model, R"({"chat_template": 3})"), "chat_template");
}

// Reproduced by fuzz_tokenizer (fuzz/corpus/fuzz_tokenizer/crash-template-name-type): a chat_template
// list whose entry has a name that is not a string loaded with a JSON type_error escaping
// instead of loading (such a name is simply not "default").
TEST(TokenizerLoad, ChatTemplateListNamesOfAnyType) {
    const std::string model = byte_vocab();
    auto t = Tokenizer::load(
        dir_with(
            "cfg-template-name", model,
            R"({"chat_template": [{"template": "A"}, {"template": "B", "name": 1}, {"name": null, "template": "C"}]})")
            .string());
    EXPECT_EQ(t.chat_template(), "A");
    t = Tokenizer::load(
        dir_with("cfg-template-default", model,
                 R"({"chat_template": [{"template": "A", "name": ["x"]}, {"template": "B", "name": "default"}]})")
            .string());
    EXPECT_EQ(t.chat_template(), "B");
}

TEST(TokenizerLoad, KimiLayout) {
    const auto dir = dir_with("layout", byte_vocab({"ab", "abc"}),
                              R"({"added_tokens_decoder": {"258": {"content": "[BOS]"}, "259": {"content": "[EOS]"},
                                  "260": {"content": "<|im_end|>"}, "513": {"content": "[LAST]"}},
                                  "bos_token": {"content": "[BOS]"}, "eos_token": "[EOS]", "pad_token": null,
                                  "chat_template": "TEMPLATE"})");
    const Tokenizer t = Tokenizer::load(dir.string());
    EXPECT_EQ(t.n_base(), 258);
    EXPECT_EQ(t.n_vocab(), 258 + kSpecialSlots);
    EXPECT_EQ(t.bos_id(), 258);
    EXPECT_EQ(t.eos_id(), 259);
    EXPECT_EQ(t.pad_id(), -1);
    EXPECT_EQ(t.unk_id(), -1);
    EXPECT_EQ(t.special_id("<|reserved_token_261|>"), 261);
    EXPECT_EQ(t.special_id("[LAST]"), 513);
    EXPECT_FALSE(t.special_id("<|reserved_token_513|>").has_value());
    EXPECT_EQ(t.stop_ids(), (std::vector<int32_t>{260, 259}));
    EXPECT_EQ(t.chat_template(), "TEMPLATE");
    EXPECT_TRUE(t.is_special(258));
    EXPECT_FALSE(t.is_special(257));
    EXPECT_EQ(t.token_bytes(257), "abc");
    EXPECT_EQ(t.token_bytes(261), "<|reserved_token_261|>");
    EXPECT_EQ(t.token_bytes(515), "<|reserved_token_515|>");
    EXPECT_THROW(t.token_bytes(516), Error);
    EXPECT_THROW(t.token_bytes(-1), Error);
    EXPECT_THROW(t.decode(std::vector<int32_t>{1, 99999}), Error);
    EXPECT_EQ(t.encode("abcab"), (std::vector<int32_t>{257, 256}));
}

TEST(TokenizerLoad, ToleratesCrlfAndBlankLines) {
    std::string model = byte_vocab({"ab"});
    std::string crlf;
    for (char c : model) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    const Tokenizer t = Tokenizer::load(dir_with("crlf", crlf + "\n\n").string());
    EXPECT_EQ(t.n_base(), 257);
    EXPECT_EQ(count_base_tokens(dir_with("crlf2", crlf).string()), 257);
}

}   // namespace
}   // namespace kimi::tok::test
