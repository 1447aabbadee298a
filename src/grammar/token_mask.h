// TokenTrie: a vocabulary's byte strings as a trie, built once per tokenizer, so the tokens a
// grammar allows next are found by walking the trie with the matcher: a byte the matcher
// refuses prunes every token below it at once (most of a 163,840-token vocabulary is cut at its
// first byte). Tokens with no bytes (special tokens) are never allowed by a grammar; the caller
// decides about end-of-sequence (allowed where Matcher::can_end()).
// The walk interns the matcher states it reaches and remembers (state, byte) → state, so a byte
// is matched once per distinct state rather than once per trie node: inside a JSON string,
// where nearly every token is allowed, the 163,840 tokens share a few hundred states.
// Not thread-safe (the scratch is kept between calls).
// ref: the vocabulary tries of llama.cpp's grammar sampler and of xgrammar's mask computation.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace kimi::grammar {

class TokenTrie {
public:
    explicit TokenTrie(const std::vector<std::string>& token_bytes);   // token id → its bytes

    int32_t n_tokens() const { return n_tokens_; }
    // allowed[t] = 1 for every token whose bytes the matcher accepts from its current state
    // (the matcher is not changed). allowed is resized to n_tokens().
    void allowed(const Matcher& m, std::vector<uint8_t>& allowed) const;

private:
    struct Node {
        uint8_t byte = 0;
        int32_t first_child = -1, next_sibling = -1;
        int32_t first_token = -1;   // tokens ending here: tokens_[first_token..] while end_of_[...] == this node
        int32_t n_tokens = 0;
    };
    // the state `state` (an interned id) at `node`: marks the tokens below it
    void walk(int32_t node, int32_t state, const Matcher& m, std::vector<uint8_t>& allowed) const;
    // the same without interning (past the state budget), with the stacks in levels_[depth]
    void walk_plain(int32_t node, size_t depth, const Matcher& m, std::vector<uint8_t>& allowed) const;
    int32_t intern(const StackSet& s) const;   // its id, or −1 past kMaxStates
    static constexpr size_t kMaxStates = 4096;
    static constexpr int32_t kUnknown = -2, kRefused = -1;

    std::vector<Node> nodes_;       // nodes_[0]: the root (no byte)
    std::vector<int32_t> tokens_;   // token ids grouped by the node they end at
    int32_t n_tokens_ = 0;
    mutable std::vector<StackSet> levels_;   // the matcher's stacks at each trie depth (reused)
    mutable std::vector<StackSet> states_;   // interned states of the current walk
    mutable std::unordered_map<std::string, int32_t> state_ids_;
    mutable std::vector<int32_t> next_;   // [state · 256 + byte] → state, kRefused or kUnknown
    mutable StackSet scratch_;
    mutable std::string key_;
};

}   // namespace kimi::grammar
