// Structured output in the engine: a compiled grammar shared by the requests that use it (with
// its cache of token masks by matcher state), the vocabulary as grammar bytes (a trie built
// once per engine), and one request's matcher. The mask of a state is the set of tokens whose
// bytes the grammar accepts next; end-of-sequence (and stop_token_ids) only where the grammar
// may end. Special tokens are seen as special_token_bytes(text), so a grammar names them as
// <|name|>. ref: docs/server.md "Structured output"; llama.cpp's grammar sampler, xgrammar.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace kimi {

class StructuredOutput {
public:
    explicit StructuredOutput(grammar::Grammar g) : grammar_(std::move(g)) {}
    const grammar::Grammar& grammar() const { return grammar_; }

    // Masks by matcher state (bit t of word t/64 = token t allowed), shared by every request
    // with this grammar; at most kMaxCached states are kept (then the cache starts over).
    static constexpr size_t kMaxCached = 1024;
    bool find_mask(const std::string& key, std::vector<uint64_t>& out) const;
    void store_mask(const std::string& key, const std::vector<uint64_t>& mask) const;

private:
    grammar::Grammar grammar_;
    mutable std::mutex mu_;
    mutable std::unordered_map<std::string, std::vector<uint64_t>> masks_;
};

// Token id → the bytes a grammar sees, and their trie. Ordinary tokens holding a 0xFF byte
// (never part of UTF-8 text) and ids past the tokenizer are left out (never allowed).
class GrammarVocab {
public:
    GrammarVocab(const tok::Tokenizer& t, int64_t vocab_size);
    int64_t size() const { return int64_t(bytes_.size()); }
    const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
    const grammar::TokenTrie& trie() const { return trie_; }

private:
    std::vector<std::string> bytes_;
    grammar::TokenTrie trie_;
};

// One request's place in its grammar.
class GrammarState {
public:
    GrammarState(std::shared_ptr<const StructuredOutput> so, const GrammarVocab& vocab)
        : so_(std::move(so)), vocab_(vocab), matcher_(so_->grammar()) {}

    // The tokens allowed next (end_ids: allowed only where the grammar may end). Returns false
    // if there is none. mask is sized to the vocabulary in 64-bit words.
    bool mask(std::span<const int32_t> end_ids, std::vector<uint64_t>& mask);
    // Advances past a sampled token (an end id, or a token the mask allowed).
    void accept(int32_t token);
    // Advances past `token` if the grammar allows it here (an end id: where it may end);
    // false, and no change, if not. The sampler's fast path: try the unmasked draw first.
    bool try_accept(int32_t token, std::span<const int32_t> end_ids);
    bool can_end() const { return matcher_.can_end(); }

private:
    std::shared_ptr<const StructuredOutput> so_;
    const GrammarVocab& vocab_;
    grammar::Matcher matcher_;
    std::string key_;
    std::vector<uint8_t> allowed_;
};

}   // namespace kimi
