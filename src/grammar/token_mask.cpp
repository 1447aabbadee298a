// TokenTrie implementation (see token_mask.h).
#include "grammar/token_mask.h"

#include <algorithm>
#include <map>

namespace kimi::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) : n_tokens_(int32_t(token_bytes.size())) {
    // build with maps, then flatten into first-child / next-sibling nodes
    struct Build {
        std::map<uint8_t, int32_t> children;
        std::vector<int32_t> ends;
    };
    std::vector<Build> b(1);
    for (int32_t t = 0; t < n_tokens_; ++t) {
        const std::string& s = token_bytes[size_t(t)];
        if (s.empty()) continue;   // special tokens: no bytes for a grammar to match
        int32_t n = 0;
        for (unsigned char c : s) {
            auto it = b[size_t(n)].children.find(c);
            if (it == b[size_t(n)].children.end()) {
                b.emplace_back();
                it = b[size_t(n)].children.emplace(c, int32_t(b.size()) - 1).first;
            }
            n = it->second;
        }
        b[size_t(n)].ends.push_back(t);
    }
    nodes_.resize(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
        int32_t prev = -1;
        for (const auto& [byte, child] : b[i].children) {
            nodes_[size_t(child)].byte = byte;
            if (prev < 0)
                nodes_[i].first_child = child;
            else
                nodes_[size_t(prev)].next_sibling = child;
            prev = child;
        }
        nodes_[i].first_token = int32_t(tokens_.size());
        nodes_[i].n_tokens = int32_t(b[i].ends.size());
        tokens_.insert(tokens_.end(), b[i].ends.begin(), b[i].ends.end());
    }
}

int32_t TokenTrie::intern(const StackSet& s) const {
    key_.assign(reinterpret_cast<const char*>(s.starts.data()), s.starts.size() * sizeof(uint32_t));
    key_.append(reinterpret_cast<const char*>(s.frames.data()), s.frames.size() * sizeof(Frame));
    if (const auto it = state_ids_.find(key_); it != state_ids_.end()) return it->second;
    if (states_.size() >= kMaxStates) return -1;
    const int32_t id = int32_t(states_.size());
    state_ids_.emplace(key_, id);
    states_.push_back(s);
    next_.resize(states_.size() * 256, kUnknown);
    return id;
}

void TokenTrie::walk(int32_t node, int32_t state, const Matcher& m, std::vector<uint8_t>& allowed) const {
    for (int32_t c = nodes_[size_t(node)].first_child; c >= 0; c = nodes_[size_t(c)].next_sibling) {
        const Node& n = nodes_[size_t(c)];
        int32_t to = next_[size_t(state) * 256 + n.byte];
        if (to == kUnknown) {
            if (!m.advance(states_[size_t(state)], n.byte, scratch_)) {
                to = kRefused;
            } else if ((to = intern(scratch_)) < 0) {   // past the budget: this subtree without interning
                for (int32_t i = 0; i < n.n_tokens; ++i) allowed[size_t(tokens_[size_t(n.first_token + i)])] = 1;
                if (levels_.size() < 2) levels_.resize(2);
                levels_[1] = scratch_;
                if (n.first_child >= 0) walk_plain(c, 1, m, allowed);
                continue;
            }
            next_[size_t(state) * 256 + n.byte] = to;
        }
        if (to == kRefused) continue;   // prunes every token below c
        for (int32_t i = 0; i < n.n_tokens; ++i) allowed[size_t(tokens_[size_t(n.first_token + i)])] = 1;
        if (n.first_child >= 0) walk(c, to, m, allowed);
    }
}

void TokenTrie::walk_plain(int32_t node, size_t depth, const Matcher& m, std::vector<uint8_t>& allowed) const {
    if (levels_.size() < depth + 2) levels_.resize(depth + 2);
    for (int32_t c = nodes_[size_t(node)].first_child; c >= 0; c = nodes_[size_t(c)].next_sibling) {
        const Node& n = nodes_[size_t(c)];
        if (!m.advance(levels_[depth], n.byte, levels_[depth + 1])) continue;   // prunes every token below c
        for (int32_t i = 0; i < n.n_tokens; ++i) allowed[size_t(tokens_[size_t(n.first_token + i)])] = 1;
        if (n.first_child >= 0) walk_plain(c, depth + 1, m, allowed);
    }
}

void TokenTrie::allowed(const Matcher& m, std::vector<uint8_t>& allowed) const {
    allowed.assign(size_t(n_tokens_), 0);
    states_.clear();
    state_ids_.clear();
    next_.clear();
    walk(0, intern(m.stacks()), m, allowed);
}

}   // namespace kimi::grammar
