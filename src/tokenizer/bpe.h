// tiktoken's byte-pair merge on one pre-tokenized piece: repeatedly merge the adjacent pair
// whose concatenated bytes have the lowest rank (leftmost on a tie) until no pair is a token.
// Mirrors openai/tiktoken src/lib.rs byte_pair_encode / _byte_pair_merge (short pieces) and
// _byte_pair_merge_large (long pieces: a heap of (rank, start), same results).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/rank_table.h"

namespace kimi::tok {

// Appends the ranks of piece (non-empty) to out. Whole-piece lookup first, as tiktoken does.
void bpe_encode_piece(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out);

// The merge alone (no whole-piece shortcut): used to check that a token is reachable.
void bpe_merge(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out);

}   // namespace kimi::tok
