// Matcher implementation (see matcher.h).
#include "grammar/matcher.h"

#include <algorithm>

#include "core/error.h"

namespace kimi::grammar {

Matcher::Matcher(const Grammar& g) : g_(g) {
    for (size_t a = 0; a < g.rules[size_t(g.root)].alts.size(); ++a) settle({{g.root, int32_t(a), 0}}, stacks_);
}

void Matcher::add_unique(std::vector<Stack>& v, Stack s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(std::move(s));
}

void Matcher::settle(Stack s, std::vector<Stack>& out) const {
    std::vector<Stack> work{std::move(s)};
    while (!work.empty()) {
        Stack st = std::move(work.back());
        work.pop_back();
        // finished alternatives return to their callers (which were advanced when they called)
        while (!st.empty()) {
            const Frame& f = st.back();
            if (size_t(f.idx) < g_.rules[size_t(f.rule)].alts[size_t(f.alt)].size()) break;
            st.pop_back();
        }
        if (st.empty()) {                                  // the input may end here
            add_unique(out, std::move(st));
            continue;
        }
        const Frame f = st.back();
        const Symbol& sym = g_.rules[size_t(f.rule)].alts[size_t(f.alt)][size_t(f.idx)];
        if (sym.rule < 0) {                                // a byte range on top: settled
            add_unique(out, std::move(st));
            continue;
        }
        // call the rule: the caller moves past it first (and leaves if that was its last symbol)
        st.back().idx++;
        if (size_t(st.back().idx) == g_.rules[size_t(f.rule)].alts[size_t(f.alt)].size()) st.pop_back();
        const Rule& callee = g_.rules[size_t(sym.rule)];
        for (size_t a = 0; a < callee.alts.size(); ++a) {
            Stack next = st;
            next.push_back({sym.rule, int32_t(a), 0});
            work.push_back(std::move(next));
        }
    }
}

bool Matcher::accept_byte(uint8_t b) {
    next_.clear();
    for (const Stack& s : stacks_) {
        if (s.empty()) continue;
        const Frame& f = s.back();
        const ByteRange r = g_.rules[size_t(f.rule)].alts[size_t(f.alt)][size_t(f.idx)].bytes;
        if (b < r.lo || b > r.hi) continue;
        Stack t = s;
        t.back().idx++;
        settle(std::move(t), next_);
    }
    if (next_.empty()) return false;
    stacks_.swap(next_);
    return true;
}

bool Matcher::accept(std::string_view bytes) {
    const std::vector<Stack> saved = stacks_;
    for (char c : bytes)
        if (!accept_byte(static_cast<uint8_t>(c))) {
            stacks_ = saved;
            return false;
        }
    return true;
}

size_t Matcher::depth() const {
    size_t d = 0;
    for (const Stack& s : stacks_) d = std::max(d, s.size());
    return d;
}

bool Matcher::can_end() const {
    return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

}  // namespace kimi::grammar
