// A synthetic Kimi-layout tokenizer directory for random test models (`kimi-cpp make-model`):
// tiktoken.model with exactly n_base_tokens ranks and tokenizer_config.json with the Kimi
// specials at Kimi's offsets after n_base, bos/eos/pad/unk and the Kimi Linear chat template.
#pragma once
#include <cstdint>
#include <string>

namespace kimi::tok {

// Ranks: the 256 single bytes (rank = byte value), then merges learned by byte-level BPE on
// a small embedded multilingual text, then (if more are needed) deterministic concatenations
// of two existing tokens. Every token of two or more bytes is reachable by tiktoken's merge
// rule (bpe_merge of its bytes yields exactly that token). Deterministic for a seed.
// n_base_tokens must be in [256, 2^30]. The model's vocab_size is then
// n_base_tokens + kModelVocabExtra (tokenizer.h). Creates dir if needed.
// kKimiLinear: the Kimi Linear specials and chat template; kKimiK3: K3's XTML markers
// (<|end_of_msg|>, <|open|>, <|close|>, <|sep|>) and no Jinja template, as K3 ships.
enum class SpecialLayout : uint8_t { kKimiLinear, kKimiK3 };
void write_synthetic_tokenizer(const std::string& dir, int32_t n_base_tokens, uint64_t seed,
                               SpecialLayout layout = SpecialLayout::kKimiLinear);

// Number of ranks in dir/tiktoken.model (non-empty lines), for a model loader to check
// vocab_size == n_base + kModelVocabExtra without loading the whole tokenizer.
int32_t count_base_tokens(const std::string& dir);

}   // namespace kimi::tok
