// Matcher: where a grammar (grammar.h) stands after the bytes seen so far — the set of parse
// stacks still alive, each with a byte range on top (or empty: the input may end here). A byte
// advances every stack whose top range holds it; a byte no stack takes is refused and changes
// nothing, so a caller can try a token's bytes and keep or drop them. Right recursion (the
// repetitions the parser writes) runs as a tail call, so stacks do not grow with a repetition.
// Stack sets are flat arrays (StackSet) reused between steps: advancing allocates nothing once
// the buffers have grown, which is what the vocabulary walk (token_mask.h) relies on.
// ref: the stack-set matching of llama.cpp's grammar sampler, over bytes instead of code points.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace kimi::grammar {

struct Frame {
    int32_t rule, alt, idx;
    bool operator==(const Frame& o) const { return rule == o.rule && alt == o.alt && idx == o.idx; }
};

// A set of stacks in one array: stack i is frames[starts[i], starts[i + 1]) (the last ends at
// frames.size()). Distinct stacks only.
struct StackSet {
    std::vector<Frame> frames;
    std::vector<uint32_t> starts;

    size_t size() const { return starts.size(); }
    bool empty() const { return starts.empty(); }
    std::span<const Frame> stack(size_t i) const {
        const size_t e = i + 1 < starts.size() ? starts[i + 1] : frames.size();
        return {frames.data() + starts[i], e - starts[i]};
    }
    void clear() { frames.clear(), starts.clear(); }
    void add_unique(std::span<const Frame> s);   // no-op past kMaxStacks (see Matcher)
    // An ambiguous grammar could keep more parses alive with every byte; past this many stacks
    // (or frames in all) the others are dropped. That only narrows what may follow (what is
    // accepted is still a sentence), so output stays valid and a step stays bounded.
    static constexpr size_t kMaxStacks = 1024, kMaxFrames = size_t(1) << 16;
};

// Settling (expanding rules until a byte range is on top) follows every path through rules that
// match nothing. An ambiguous grammar can have exponentially many: ("" | "") forty times is 2^40
// paths to one stack, and nested alternatives that each keep a frame are 2^depth stacks. So one
// settle expands each stack once (checked past kMemoAfter expansions, which ordinary grammars
// never reach) and stops after kMaxSettle expansions (like kMaxStacks: fewer continuations, a
// bounded step).
constexpr size_t kMemoAfter = 256, kMaxSettle = size_t(1) << 16;

class Matcher {
public:
    explicit Matcher(const Grammar& g);   // at the start of `root`; g must outlive the matcher

    bool accept_byte(uint8_t b);           // false (and no change) if b cannot come next
    bool accept(std::string_view bytes);   // all of them, or none (false)
    bool can_end() const { return can_end(stacks_); }
    bool dead() const { return stacks_.empty(); }
    size_t n_stacks() const { return stacks_.size(); }
    size_t depth() const;   // the deepest stack (frames)
    // The state as bytes: equal keys ⇒ the same continuations (for caching token masks).
    void state_key(std::string& out) const;

    // The low-level step used by the vocabulary walk: to ← from after byte b; false if none.
    bool advance(const StackSet& from, uint8_t b, StackSet& to) const;
    static bool can_end(const StackSet& s);
    const StackSet& stacks() const { return stacks_; }

private:
    // Expands `first` until each stack's top is a byte range (or it is empty) into out.
    void settle(std::span<const Frame> first, StackSet& out) const;
    const Symbol& top(std::span<const Frame> s) const {
        const Frame& f = s.back();
        return g_->rules[size_t(f.rule)].alts[size_t(f.alt)][size_t(f.idx)];
    }

    const Grammar* g_;
    StackSet stacks_, next_;
    mutable std::vector<Frame> cur_, seed_;          // the stack being settled; a stack after its byte
    mutable std::vector<std::vector<Frame>> work_;   // pending stacks (reused buffers)
};

}   // namespace kimi::grammar
