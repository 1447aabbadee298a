// The synthetic tokenizer writer: exact size, determinism, the Kimi special layout, every
// multi-byte token reachable by tiktoken's merge, and < 10 s for Kimi's 163,584 base ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

#include "core/error.h"

#include "tokenizer/bpe.h"
#include "tokenizer/rank_table.h"
#include "test_util.h"

namespace kimi::tok::test {
namespace {

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

TEST(Synthetic, KimiSizeIsFastExactAndReachable) {
    const auto dir = temp_dir("synth-kimi");
    const auto t0 = std::chrono::steady_clock::now();
    write_synthetic_tokenizer(dir.string(), 163584, 1);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 10.0);
    EXPECT_EQ(count_base_tokens(dir.string()), 163584);
    const Tokenizer t = Tokenizer::load(dir.string());
    EXPECT_EQ(t.n_base(), 163584);
    EXPECT_EQ(t.n_vocab(), 163584 + 258);
    EXPECT_EQ(t.bos_id(), 163584);
    EXPECT_EQ(t.eos_id(), 163585);
    EXPECT_EQ(t.special_id("<|im_end|>"), 163586);
    EXPECT_EQ(t.special_id("<|im_user|>"), 163587);
    EXPECT_EQ(t.special_id("<|im_assistant|>"), 163588);
    EXPECT_EQ(t.special_id("<|reserved_token_163589|>"), 163589);
    EXPECT_EQ(t.special_id("<|im_system|>"), 163594);
    EXPECT_EQ(t.special_id("<|tool_calls_section_begin|>"), 163595);
    EXPECT_EQ(t.special_id("<|tool_call_end|>"), 163599);
    EXPECT_EQ(t.special_id("<|im_middle|>"), 163601);
    EXPECT_EQ(t.unk_id(), 163838);
    EXPECT_EQ(t.pad_id(), 163839);
    EXPECT_EQ(t.special_id("<|reserved_token_163841|>"), 163841);
    EXPECT_FALSE(t.chat_template().empty());
    // Single bytes first; then every token is reachable: merging its bytes gives exactly it.
    RankTable table;
    for (int32_t r = 0; r < t.n_base(); ++r) ASSERT_TRUE(table.insert(t.token_bytes(r), uint32_t(r)));
    for (int b = 0; b < 256; ++b) ASSERT_EQ(t.token_bytes(b), std::string(1, char(b)));
    std::vector<int32_t> out;
    for (int32_t r = 256; r < t.n_base(); ++r) {
        out.clear();
        bpe_merge(t.token_bytes(r), table, out);
        ASSERT_EQ(out, std::vector<int32_t>{r}) << "rank " << r;
    }
    // The learned part is real text: common words are single tokens.
    EXPECT_EQ(t.encode(" the").size(), 1u);
}

TEST(Synthetic, DeterministicPerSeed) {
    const auto a = temp_dir("synth-a"), b = temp_dir("synth-b"), c = temp_dir("synth-c");
    write_synthetic_tokenizer(a.string(), 5000, 3);
    write_synthetic_tokenizer(b.string(), 5000, 3);
    write_synthetic_tokenizer(c.string(), 5000, 4);
    EXPECT_EQ(slurp(a / "tiktoken.model"), slurp(b / "tiktoken.model"));
    EXPECT_EQ(slurp(a / "tokenizer_config.json"), slurp(b / "tokenizer_config.json"));
    EXPECT_NE(slurp(a / "tiktoken.model"), slurp(c / "tiktoken.model"));
    EXPECT_EQ(count_base_tokens(a.string()), 5000);
    write_synthetic_tokenizer(a.string(), 256, 3);   // bytes only
    EXPECT_EQ(Tokenizer::load(a.string()).n_base(), 256);
    EXPECT_THROW(write_synthetic_tokenizer(a.string(), 100, 3), Error);
}

}   // namespace
}   // namespace kimi::tok::test
