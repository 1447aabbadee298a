// Structured output in the engine (see structured_output.h).
#include "runtime/structured_output.h"

#include <algorithm>

namespace kimi {

bool StructuredOutput::find_mask(const std::string& key, std::vector<uint64_t>& out) const {
    std::lock_guard<std::mutex> lk(mu_);
    const auto it = masks_.find(key);
    if (it == masks_.end()) return false;
    out = it->second;
    return true;
}

void StructuredOutput::store_mask(const std::string& key, const std::vector<uint64_t>& mask) const {
    std::lock_guard<std::mutex> lk(mu_);
    if (masks_.size() >= kMaxCached) masks_.clear();
    masks_.emplace(key, mask);
}

namespace {

std::vector<std::string> grammar_bytes(const tok::Tokenizer& t, int64_t vocab_size) {
    std::vector<std::string> out(static_cast<size_t>(vocab_size));
    const int32_t n = std::min<int32_t>(t.n_vocab(), int32_t(vocab_size));
    for (int32_t id = 0; id < n; ++id) {
        const std::string_view b = t.token_bytes(id);
        if (t.is_special(id))
            out[size_t(id)] = grammar::special_token_bytes(b);
        else if (b.find(char(grammar::kSpecialByte)) == std::string_view::npos)
            out[size_t(id)] = std::string(b);
    }
    return out;
}

}   // namespace

GrammarVocab::GrammarVocab(const tok::Tokenizer& t, int64_t vocab_size)
    : bytes_(grammar_bytes(t, vocab_size)), trie_(bytes_) {}

bool GrammarState::mask(std::span<const int32_t> end_ids, std::vector<uint64_t>& mask) {
    const size_t words = size_t((vocab_.size() + 63) / 64);
    matcher_.state_key(key_);
    if (!so_->find_mask(key_, mask)) {
        vocab_.trie().allowed(matcher_, allowed_);
        mask.assign(words, 0);
        for (size_t t = 0; t < allowed_.size(); ++t)
            if (allowed_[t]) mask[t >> 6] |= uint64_t(1) << (t & 63);
        so_->store_mask(key_, mask);
    }
    if (matcher_.can_end())
        for (const int32_t id : end_ids)
            if (id >= 0 && id < vocab_.size()) mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    return std::any_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; });
}

bool GrammarState::try_accept(int32_t token, std::span<const int32_t> end_ids) {
    if (std::find(end_ids.begin(), end_ids.end(), token) != end_ids.end()) return matcher_.can_end();
    if (token < 0 || token >= vocab_.size() || vocab_.bytes(token).empty()) return false;
    return matcher_.accept(vocab_.bytes(token));
}

void GrammarState::accept(int32_t token) {
    if (token < 0 || token >= vocab_.size()) return;
    matcher_.accept(vocab_.bytes(token));   // an end id has no bytes here, or was allowed by the mask
}

}   // namespace kimi
