// TokenTrie: a vocabulary's byte strings as a trie, built once per tokenizer, so the tokens a
// grammar allows next are found by walking the trie with the matcher: a byte the matcher
// refuses prunes every token below it at once (most of a 163,840-token vocabulary is cut at its
// first byte). Tokens with no bytes (special tokens) are never allowed by a grammar; the caller
// decides about end-of-sequence (allowed where Matcher::can_end()).
// Not thread-safe (scratch per trie depth is kept between calls).
// ref: the vocabulary tries of llama.cpp's grammar sampler and of xgrammar's mask computation.
#pragma once
#include <cstdint>
#include <string>
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
    void walk(int32_t node, size_t depth, const Matcher& m, std::vector<uint8_t>& allowed) const;

    std::vector<Node> nodes_;        // nodes_[0]: the root (no byte)
    std::vector<int32_t> tokens_;    // token ids grouped by the node they end at
    int32_t n_tokens_ = 0;
    mutable std::vector<StackSet> levels_;   // the matcher's stacks at each trie depth (reused)
};

}  // namespace kimi::grammar
