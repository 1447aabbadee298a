// Matcher: where a grammar (grammar.h) stands after the bytes seen so far — the set of parse
// stacks still alive, each with a byte range on top (or empty: the input may end here). A byte
// advances every stack whose top range holds it; a byte no stack takes is refused and changes
// nothing, so a caller can try a token's bytes and keep or drop them. Right recursion (the
// repetitions the parser writes) runs as a tail call, so stacks do not grow with a repetition.
// ref: the stack-set matching of llama.cpp's grammar sampler, over bytes instead of code points.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace kimi::grammar {

class Matcher {
public:
    explicit Matcher(const Grammar& g);   // at the start of `root`; g must outlive the matcher

    bool accept_byte(uint8_t b);          // false (and no change) if b cannot come next
    bool accept(std::string_view bytes);  // all of them, or none (false)
    bool can_end() const;                 // the bytes so far are a whole sentence
    bool dead() const { return stacks_.empty(); }
    size_t n_stacks() const { return stacks_.size(); }
    size_t depth() const;                 // the deepest stack (frames)

private:
    struct Frame {
        int32_t rule, alt, idx;
        bool operator==(const Frame& o) const { return rule == o.rule && alt == o.alt && idx == o.idx; }
    };
    using Stack = std::vector<Frame>;
    // Expands `s` until its top is a byte range (or it is empty), adding the results to out.
    void settle(Stack s, std::vector<Stack>& out) const;
    static void add_unique(std::vector<Stack>& v, Stack s);

    const Grammar& g_;
    std::vector<Stack> stacks_, next_;
};

}  // namespace kimi::grammar
