// Internal state of a loaded Tokenizer, shared by load.cpp, encode.cpp and decode.cpp.
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/rank_table.h"
#include "tokenizer/tokenizer.h"

namespace kimi::tok {

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Tokenizer::Impl {
    RankTable ranks;
    int32_t n_base = 0;
    Pattern pattern = Pattern::kimi;

    std::vector<std::string> special_text;   // index: id - n_base
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> special_ids;
    std::vector<size_t> special_lengths;     // distinct lengths, longest first
    std::array<bool, 256> special_first{};   // first bytes of special tokens

    int32_t bos = -1, eos = -1, pad = -1, unk = -1;
    std::string chat_template;

    int32_t n_vocab() const { return n_base + int32_t(special_text.size()); }
    int32_t find_special(std::string_view s) const {
        auto it = special_ids.find(s);
        return it == special_ids.end() ? -1 : it->second;
    }
    std::string_view bytes_of(int32_t id) const;   // throws kimi::Error if out of range

    // Encoding steps (encode.cpp).
    void encode_text(std::string_view text, bool allow_special, std::vector<int32_t>& out) const;
    void encode_chunk(std::string_view chunk, bool allow_special, std::vector<int32_t>& out) const;
    void encode_ordinary(std::string_view segment, std::vector<int32_t>& out) const;
};

}   // namespace kimi::tok
