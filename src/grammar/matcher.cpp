// Matcher implementation (see matcher.h).
#include "grammar/matcher.h"

#include <algorithm>
#include <string>
#include <unordered_set>

namespace kimi::grammar {

void StackSet::add_unique(std::span<const Frame> s) {
    if (size() >= kMaxStacks || frames.size() + s.size() > kMaxFrames) return;
    for (size_t i = 0; i < size(); ++i) {
        const std::span<const Frame> t = stack(i);
        if (t.size() == s.size() && std::equal(t.begin(), t.end(), s.begin())) return;
    }
    starts.push_back(uint32_t(frames.size()));
    frames.insert(frames.end(), s.begin(), s.end());
}

Matcher::Matcher(const Grammar& g) : g_(&g) {
    for (size_t a = 0; a < g.rules[size_t(g.root)].alts.size(); ++a) {
        const Frame f{g.root, int32_t(a), 0};
        settle(std::span<const Frame>(&f, 1), stacks_);
    }
}

void Matcher::settle(std::span<const Frame> first, StackSet& out) const {
    size_t n_work = 0;   // work_[0, n_work): pending stacks; buffers past it are kept for reuse
    auto push = [&](std::span<const Frame> s) {
        if (n_work == work_.size()) work_.emplace_back();
        work_[n_work++].assign(s.begin(), s.end());
    };
    push(first);
    size_t expanded = 0;
    std::unordered_set<std::string> seen;   // stacks expanded so far, past kMemoAfter (see matcher.h)
    while (n_work > 0 && ++expanded <= kMaxSettle) {
        cur_.swap(work_[--n_work]);
        std::vector<Frame>& st = cur_;
        // finished alternatives return to their callers (which were advanced when they called)
        while (!st.empty()) {
            const Frame& f = st.back();
            if (size_t(f.idx) < g_->rules[size_t(f.rule)].alts[size_t(f.alt)].size()) break;
            st.pop_back();
        }
        if (expanded > kMemoAfter &&
            !seen.emplace(reinterpret_cast<const char*>(st.data()), st.size() * sizeof(Frame)).second)
            continue;                           // expanded before: it would add the same stacks again
        if (st.empty() || top(st).rule < 0) {   // the input may end here / a byte range on top
            out.add_unique(st);
            continue;
        }
        const Frame f = st.back();
        const int32_t callee = top(st).rule;
        // call the rule: the caller moves past it first (and leaves if that was its last symbol)
        st.back().idx++;
        if (size_t(st.back().idx) == g_->rules[size_t(f.rule)].alts[size_t(f.alt)].size()) st.pop_back();
        const Rule& r = g_->rules[size_t(callee)];
        for (size_t a = r.alts.size(); a-- > 0;) {
            st.push_back({callee, int32_t(a), 0});
            push(st);
            st.pop_back();
        }
    }
}

bool Matcher::advance(const StackSet& from, uint8_t b, StackSet& to) const {
    to.clear();
    for (size_t i = 0; i < from.size(); ++i) {
        const std::span<const Frame> s = from.stack(i);
        if (s.empty()) continue;
        const ByteRange r = top(s).bytes;
        if (b < r.lo || b > r.hi) continue;
        seed_.assign(s.begin(), s.end());
        seed_.back().idx++;
        settle(seed_, to);
    }
    return !to.empty();
}

bool Matcher::accept_byte(uint8_t b) {
    if (!advance(stacks_, b, next_)) return false;
    std::swap(stacks_, next_);
    return true;
}

bool Matcher::accept(std::string_view bytes) {
    const StackSet saved = stacks_;
    for (char c : bytes)
        if (!accept_byte(static_cast<uint8_t>(c))) {
            stacks_ = saved;
            return false;
        }
    return true;
}

size_t Matcher::depth() const {
    size_t d = 0;
    for (size_t i = 0; i < stacks_.size(); ++i) d = std::max(d, stacks_.stack(i).size());
    return d;
}

bool Matcher::can_end(const StackSet& s) {
    for (size_t i = 0; i < s.size(); ++i)
        if (s.stack(i).empty()) return true;
    return false;
}

void Matcher::state_key(std::string& out) const {
    out.clear();
    for (size_t i = 0; i < stacks_.size(); ++i) {
        const std::span<const Frame> s = stacks_.stack(i);
        const uint32_t n = uint32_t(s.size());
        out.append(reinterpret_cast<const char*>(&n), sizeof n);
        out.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(Frame));
    }
}

}   // namespace kimi::grammar
