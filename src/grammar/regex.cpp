// Regex → GBNF (see regex.h). The pattern is parsed into a small tree whose characters are
// code-point sets; the tree is kept simplified as it is built (no node that matches nothing, no
// unbounded repetition of something that can match the empty string — GBNF would reject that as
// left recursion), then printed as one GBNF expression with every special character escaped.
#include "grammar/regex.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/error.h"

namespace kimi::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxCount = 10000;       // the largest repetition count
constexpr int kMaxDepth = 100;         // group nesting
constexpr size_t kMaxNodes = 200000;   // the tree after simplification
constexpr size_t kMaxRules = 90000;    // what the printed expression makes parse_grammar create

[[noreturn]] void too_large() { throw Error("regex: the pattern expands to too large a grammar"); }

// Sorted, merged, within 0-10FFFF, surrogates removed.
Ranges normalized(Ranges in) {
    Ranges cut;
    for (auto [lo, hi] : in) {
        hi = std::min(hi, kMaxCodePoint);
        if (lo > hi) continue;
        if (lo <= 0xDFFF && hi >= 0xD800) {
            if (lo < 0xD800) cut.push_back({lo, 0xD7FF});
            if (hi > 0xDFFF) cut.push_back({0xE000, hi});
        } else {
            cut.push_back({lo, hi});
        }
    }
    std::sort(cut.begin(), cut.end());
    Ranges out;
    for (const auto& r : cut) {
        if (!out.empty() && r.first <= out.back().second + 1)
            out.back().second = std::max(out.back().second, r.second);
        else
            out.push_back(r);
    }
    return out;
}
Ranges negated(const Ranges& r) { return normalized(complement(normalized(r))); }
Ranges minus(const Ranges& a, Ranges b) {
    Ranges na = negated(a);
    na.insert(na.end(), b.begin(), b.end());
    return negated(na);
}
bool contains(const Ranges& r, uint32_t cp) {
    return std::any_of(r.begin(), r.end(), [&](const auto& x) { return cp >= x.first && cp <= x.second; });
}

// \d \w \s and their negations (ASCII meanings).
Ranges shorthand(char e) {
    Ranges r;
    const char lower = char(e | 0x20);
    if (lower == 'd')
        r = {{'0', '9'}};
    else if (lower == 'w')
        r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    else
        r = {{'\t', '\r'}, {' ', ' '}};   // \t \n \v \f \r and space
    return e == lower ? r : negated(r);
}

struct Node {
    enum Kind { kEmpty, kNever, kChar, kClass, kSeq, kAlt, kRepeat } kind = kEmpty;
    uint32_t cp = 0;          // kChar
    Ranges set;               // kClass: non-empty, normalized
    std::vector<Node> kids;   // kSeq, kAlt: two or more; kRepeat: one
    int lo = 0, hi = -1;      // kRepeat: hi −1 is unbounded
    bool nullable = true;     // matches the empty string
    size_t size = 1;          // nodes in this tree
};

Node never_node() {
    Node n;
    n.kind = Node::kNever;
    n.nullable = false;
    return n;
}
Node char_node(uint32_t cp) {
    Node n;
    n.kind = Node::kChar;
    n.cp = cp;
    n.nullable = false;
    return n;
}
Node class_node(Ranges set, bool json) {
    set = normalized(std::move(set));
    if (json) set = minus(set, {{0, 0x1F}});   // control characters only ever as literal escapes
    if (set.empty()) return never_node();
    Node n;
    n.kind = Node::kClass;
    n.set = std::move(set);
    n.nullable = false;
    return n;
}
void finish(Node& n) {
    n.size = 1;
    for (const Node& k : n.kids) n.size += k.size;
    if (n.size > kMaxNodes) too_large();
}
Node seq_node(std::vector<Node> parts) {
    Node n;
    n.kind = Node::kSeq;
    for (Node& p : parts) {
        if (p.kind == Node::kNever) return never_node();
        if (p.kind == Node::kEmpty) continue;
        if (p.kind == Node::kSeq) {
            for (Node& k : p.kids) n.kids.push_back(std::move(k));
        } else {
            n.kids.push_back(std::move(p));
        }
    }
    if (n.kids.empty()) return Node{};
    if (n.kids.size() == 1) return std::move(n.kids[0]);
    n.nullable = std::all_of(n.kids.begin(), n.kids.end(), [](const Node& k) { return k.nullable; });
    finish(n);
    return n;
}
Node repeat_node(Node x, int lo, int hi);
Node alt_node(std::vector<Node> parts) {
    Node n;
    n.kind = Node::kAlt;
    bool empty = false;
    for (Node& p : parts) {
        if (p.kind == Node::kNever) continue;
        if (p.kind == Node::kEmpty) {
            empty = true;
        } else if (p.kind == Node::kAlt) {
            for (Node& k : p.kids) n.kids.push_back(std::move(k));
        } else {
            n.kids.push_back(std::move(p));
        }
    }
    if (n.kids.empty()) return empty ? Node{} : never_node();
    n.nullable = std::any_of(n.kids.begin(), n.kids.end(), [](const Node& k) { return k.nullable; });
    if (n.kids.size() == 1)
        return empty && !n.nullable ? repeat_node(std::move(n.kids[0]), 0, 1) : std::move(n.kids[0]);
    if (empty && !n.nullable) {
        n.kids.push_back(Node{});   // an empty branch: ( "a" | "b" | )
        n.nullable = true;
    }
    finish(n);
    return n;
}
// x minus the empty string.
Node nonempty(Node x) {
    if (!x.nullable) return x;
    switch (x.kind) {
        case Node::kEmpty: return never_node();
        case Node::kSeq: {   // every part nullable: the first non-empty part is kids[i]
            std::vector<Node> alts;
            size_t total = 0;
            for (size_t i = 0; i < x.kids.size(); ++i) {
                std::vector<Node> parts{nonempty(x.kids[i])};
                parts.insert(parts.end(), x.kids.begin() + std::ptrdiff_t(i) + 1, x.kids.end());
                alts.push_back(seq_node(std::move(parts)));
                if ((total += alts.back().size) > kMaxNodes) too_large();
            }
            return alt_node(std::move(alts));
        }
        case Node::kAlt: {
            std::vector<Node> alts;
            for (Node& k : x.kids) alts.push_back(nonempty(std::move(k)));
            return alt_node(std::move(alts));
        }
        case Node::kRepeat:   // 1 to hi non-empty pieces (empty pieces can always be dropped)
            return repeat_node(nonempty(std::move(x.kids[0])), 1, x.hi);
        default: return x;
    }
}
Node repeat_node(Node x, int lo, int hi) {
    if (hi == 0 || x.kind == Node::kEmpty) return Node{};
    if (x.kind == Node::kNever) return lo == 0 ? Node{} : never_node();
    if (x.nullable) {   // x{lo,hi} = x{0,hi}; unbounded: (x minus ε)*, which is not left-recursive
        lo = 0;
        if (hi < 0) {
            x = nonempty(std::move(x));
            if (x.kind == Node::kNever) return Node{};
        }
    }
    if (lo == 1 && hi == 1) return x;
    Node n;
    n.kind = Node::kRepeat;
    n.lo = lo, n.hi = hi;
    n.nullable = lo == 0;
    n.kids.push_back(std::move(x));
    finish(n);
    return n;
}

class RegexParser {
public:
    RegexParser(std::string_view p, bool json) : p_(p), json_(json) {}

    Node parse() {
        Flags f;
        Node n = alternation(0, true, f);
        if (pos_ < p_.size()) fail("unbalanced ')'", pos_);   // the top level stops only there
        return n;
    }

private:
    struct Flags {
        bool anchored = false;   // holds ^ or $
        bool ended = false;      // some branch ends with $: nothing may follow
    };
    struct Count {
        int lo = 0, hi = -1;
        size_t end = 0;   // just past the quantifier
    };

    [[noreturn]] void fail(const std::string& what, size_t at) const {
        throw Error("regex: " + what + " (at position " + std::to_string(at) + ")");
    }
    bool at(size_t i, char c) const { return i < p_.size() && p_[i] == c; }
    bool ahead(std::string_view s) const { return p_.substr(pos_).starts_with(s); }

    Node alternation(int depth, bool at_start, Flags& f) {
        std::vector<Node> branches;
        for (;;) {
            branches.push_back(branch(depth, at_start, f));
            if (!at(pos_, '|')) return alt_node(std::move(branches));
            ++pos_;
        }
    }

    Node branch(int depth, bool at_start, Flags& f) {
        std::vector<Node> parts;
        std::optional<size_t> ended;   // where the $ that ends this branch is
        while (pos_ < p_.size()) {
            const size_t here = pos_;
            const char c = p_[pos_];
            if (c == '|' || c == ')') break;
            if (c == '^' || ahead("\\A")) {
                if (!at_start) fail("'^' is only supported at the start of the pattern", here);
                pos_ += c == '^' ? 1 : 2;
                f.anchored = true;
                if (starts_quantifier(pos_)) fail("nothing to repeat", pos_);
                continue;
            }
            if (c == '$' || ahead("\\Z")) {
                pos_ += c == '$' ? 1 : 2;
                if (!ended) ended = here;
                f.anchored = true;
                if (starts_quantifier(pos_)) fail("nothing to repeat", pos_);
                continue;
            }
            if (ended) fail("'$' is only supported at the end of the pattern", *ended);
            Flags inner;
            Node a = atom(depth, at_start, inner);
            at_start = false;
            if (const auto q = quantifier()) {
                if (inner.anchored) fail("a repeated group cannot hold '^' or '$'", here);
                a = repeat_node(std::move(a), q->lo, q->hi);
            }
            f.anchored |= inner.anchored;
            if (inner.ended) ended = here;
            parts.push_back(std::move(a));
        }
        if (ended) f.ended = true;
        return seq_node(std::move(parts));
    }

    // {m} {m,} {m,n} {,n} at i, or nothing (then `{` is a literal character).
    std::optional<Count> braces(size_t i) const {
        if (!at(i, '{')) return std::nullopt;
        const size_t open = i++;
        auto number = [&](bool& too_big) -> std::optional<int> {
            const size_t b = i;
            int v = 0;
            while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') {
                v = std::min(v * 10 + (p_[i] - '0'), kMaxCount + 1);
                ++i;
            }
            if (i == b) return std::nullopt;
            too_big |= v > kMaxCount;
            return v;
        };
        bool too_big = false;
        const auto lo = number(too_big);
        std::optional<int> hi = lo;
        bool comma = false;
        if (at(i, ',')) {
            ++i, comma = true;
            hi = number(too_big);
        }
        if (!at(i, '}') || (!lo && !(comma && hi))) return std::nullopt;
        if (too_big) fail("repetition count too large (at most " + std::to_string(kMaxCount) + ")", open);
        Count c{lo.value_or(0), hi.value_or(-1), i + 1};
        if (c.hi >= 0 && c.hi < c.lo) fail("repetition {m,n} with n < m", open);
        return c;
    }
    bool starts_quantifier(size_t i) const { return at(i, '*') || at(i, '+') || at(i, '?') || braces(i).has_value(); }
    std::optional<Count> quantifier() {
        if (pos_ >= p_.size()) return std::nullopt;
        Count q;
        const char c = p_[pos_];
        if (c == '*' || c == '+' || c == '?') {
            q.lo = c == '+' ? 1 : 0;
            q.hi = c == '?' ? 1 : -1;
            ++pos_;
        } else if (const auto b = braces(pos_)) {
            q = *b;
            pos_ = b->end;
        } else {
            return std::nullopt;
        }
        if (at(pos_, '?')) {
            ++pos_;   // lazy: the same strings match in full
        } else if (at(pos_, '+')) {
            fail("possessive quantifiers (*+ ++ ?+ {m,n}+) are not supported", pos_);
        }
        if (starts_quantifier(pos_)) fail("multiple repeat (a quantifier after a quantifier)", pos_);
        return q;
    }

    Node atom(int depth, bool at_start, Flags& inner) {
        const size_t here = pos_;
        switch (p_[pos_]) {
            case '(': return group(depth, at_start, inner);
            case '[': return char_class();
            case '.': ++pos_; return class_node(negated({{'\n', '\n'}}), json_);
            case '*':
            case '+':
            case '?': fail("nothing to repeat", here);
            case '{':
                if (braces(pos_)) fail("nothing to repeat", here);
                ++pos_;
                return char_node('{');
            case '\\': {
                const char e = pos_ + 1 < p_.size() ? p_[pos_ + 1] : '\0';
                if (e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 's' || e == 'S') {
                    pos_ += 2;
                    return class_node(shorthand(e), json_);
                }
                if (e == 'b' || e == 'B') fail("word boundaries (\\b, \\B) are not supported", here);
                return char_node(escape(false));
            }
            default: return char_node(next_utf8());
        }
    }

    Node group(int depth, bool at_start, Flags& inner) {
        const size_t open = pos_++;
        if (depth >= kMaxDepth) fail("groups nested too deeply", open);
        if (at(pos_, '?')) {
            ++pos_;
            if (at(pos_, ':')) {
                ++pos_;
            } else if (ahead("<=") || ahead("<!")) {
                fail("lookbehind (?" + std::string(p_.substr(pos_, 2)) + "...) is not supported", open);
            } else if (at(pos_, '=') || at(pos_, '!')) {
                fail(std::string("lookahead (?") + p_[pos_] + "...) is not supported", open);
            } else if (ahead("P=")) {
                fail("backreferences (?P=name) are not supported", open);
            } else if (ahead("P<") || at(pos_, '<')) {
                pos_ += at(pos_, 'P') ? 2 : 1;
                group_name(open);
            } else if (at(pos_, '#')) {
                fail("comments (?#...) are not supported", open);
            } else if (at(pos_, '>')) {
                fail("atomic groups (?>...) are not supported", open);
            } else if (at(pos_, '(')) {
                fail("conditional groups (?(...)...) are not supported", open);
            } else if (pos_ < p_.size() && std::string_view("aiLmsux-").find(p_[pos_]) != std::string_view::npos) {
                fail("inline flags like (?i) are not supported", open);
            } else {
                fail("unknown group syntax after '(?'", open);
            }
        }
        Node body = alternation(depth + 1, at_start, inner);
        if (!at(pos_, ')')) fail("unbalanced '('", open);
        ++pos_;
        return body;
    }
    void group_name(size_t open) {
        const size_t b = pos_;
        auto word = [](char c, bool first) {
            return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
                (!first && std::isdigit(static_cast<unsigned char>(c)));
        };
        while (pos_ < p_.size() && word(p_[pos_], pos_ == b)) ++pos_;
        if (pos_ == b || !at(pos_, '>')) fail("invalid group name", open);
        ++pos_;
    }

    Node char_class() {
        const size_t open = pos_++;
        const bool neg = at(pos_, '^');
        if (neg) ++pos_;
        if (at(pos_, ']'))
            fail("empty character class ('[]' or '[^]' is ambiguous; write \\] for a literal ']')", open);
        Ranges set;
        for (;;) {
            if (pos_ >= p_.size()) fail("unterminated character class", open);
            if (p_[pos_] == ']') break;
            const size_t item = pos_;
            Ranges lo_set, hi_set;
            const uint32_t lo = class_item(lo_set);
            if (at(pos_, '-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
                ++pos_;
                const uint32_t hi = class_item(hi_set);
                if (!lo_set.empty() || !hi_set.empty())
                    fail("a class escape like \\d cannot be a range endpoint", item);
                if (hi < lo) fail("character range out of order", item);
                set.push_back({lo, hi});
            } else if (!lo_set.empty()) {
                set.insert(set.end(), lo_set.begin(), lo_set.end());
            } else {
                set.push_back({lo, lo});
            }
        }
        ++pos_;
        return class_node(neg ? negated(set) : set, json_);
    }
    // One character of a class (returned), or a class escape (its set in `set`).
    uint32_t class_item(Ranges& set) {
        if (p_[pos_] != '\\') return next_utf8();
        const char e = pos_ + 1 < p_.size() ? p_[pos_ + 1] : '\0';
        if (e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 's' || e == 'S') {
            pos_ += 2;
            set = shorthand(e);
            return 0;
        }
        return escape(true);
    }

    // A character escape at pos_ (the backslash), as its code point.
    uint32_t escape(bool in_class) {
        const size_t here = pos_++;
        if (pos_ >= p_.size()) fail("trailing backslash", here);
        const char e = p_[pos_];
        if (static_cast<unsigned char>(e) >= 0x80) return next_utf8();   // an escaped non-ASCII character
        if (!std::isalnum(static_cast<unsigned char>(e))) return uint32_t(p_[pos_++]);   // \. \* \\ \/ \- \[ ...
        ++pos_;
        switch (e) {
            case 'n': return '\n';
            case 't': return '\t';
            case 'r': return '\r';
            case 'f': return '\f';
            case 'v': return '\v';
            case 'b': return '\b';   // only reached in a class: backspace
            case '0':
                if (pos_ < p_.size() && std::isdigit(static_cast<unsigned char>(p_[pos_])))
                    fail("octal escapes are not supported", here);
                return 0;
            case 'x': return hex(2, 2, here);
            case 'U': return hex(8, 8, here);
            case 'u': {
                if (at(pos_, '{')) {
                    ++pos_;
                    const uint32_t v = hex(1, 6, here);
                    if (!at(pos_, '}')) fail("\\u{...} needs a closing '}'", here);
                    ++pos_;
                    return v;
                }
                const uint32_t v = hex(4, 4, here, true);
                if (v >= 0xD800 && v <= 0xDBFF && ahead("\\u")) {   // a UTF-16 surrogate pair
                    const size_t save = pos_;
                    pos_ += 2;
                    const uint32_t low = hex(4, 4, pos_ - 2, true);
                    if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                    pos_ = save;
                }
                if (v >= 0xD800 && v <= 0xDFFF)
                    fail("a lone surrogate (\\u" + std::string(p_.substr(here + 2, 4)) + ") is not a character", here);
                return v;
            }
            case 'c':
                if (pos_ < p_.size() && std::isalpha(static_cast<unsigned char>(p_[pos_])))
                    return uint32_t(p_[pos_++] % 32);
                fail("\\c needs a letter", here);
            case 'k': fail("backreferences (\\k<name>) are not supported", here);
            case 'p':
            case 'P': fail("Unicode property classes (\\p{...}) are not supported", here);
            case 'B': fail("unknown escape '\\B' in a character class", here);
            default: break;
        }
        if (e >= '1' && e <= '9') {
            if (in_class) fail("octal escapes are not supported", here);
            fail(std::string("backreferences (\\") + e + ") are not supported", here);
        }
        fail(std::string("unknown escape '\\") + e + "'", here);
    }
    uint32_t hex(int min_digits, int max_digits, size_t here, bool allow_surrogate = false) {
        uint32_t v = 0;
        int n = 0;
        while (n < max_digits && pos_ < p_.size() && std::isxdigit(static_cast<unsigned char>(p_[pos_]))) {
            const char c = char(std::tolower(static_cast<unsigned char>(p_[pos_++])));
            v = v * 16 + uint32_t(c <= '9' ? c - '0' : c - 'a' + 10);
            ++n;
        }
        if (n < min_digits)
            fail("escape '\\" + std::string(1, p_[here + 1]) + "' needs " + std::to_string(min_digits) + " hex digits",
                 here);
        if (v > kMaxCodePoint) fail("escape beyond U+10FFFF", here);
        if (!allow_surrogate && v >= 0xD800 && v <= 0xDFFF)
            fail("escape of a surrogate, which is not a character", here);
        return v;
    }
    uint32_t next_utf8() {
        const size_t here = pos_;
        const auto b0 = static_cast<unsigned char>(p_[pos_]);
        const int n = b0 < 0x80        ? 1
            : b0 >= 0xC2 && b0 <= 0xDF ? 2
            : b0 >= 0xE0 && b0 <= 0xEF ? 3
            : b0 >= 0xF0 && b0 <= 0xF4 ? 4
                                       : 0;
        if (n == 0 || pos_ + size_t(n) > p_.size()) fail("invalid UTF-8", here);
        uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
        for (int i = 1; i < n; ++i) {
            const auto b = static_cast<unsigned char>(p_[pos_ + size_t(i)]);
            if ((b & 0xC0) != 0x80) fail("invalid UTF-8", here);
            cp = cp << 6 | (b & 0x3F);
        }
        const uint32_t least = n == 1 ? 0 : n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
        if (cp < least || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8", here);
        pos_ += size_t(n);
        return cp;
    }

    std::string_view p_;
    bool json_;
    size_t pos_ = 0;
};

// Prints a simplified tree as GBNF, counting the rules parse_grammar will create for it.
class Printer {
public:
    explicit Printer(bool json) : json_(json) {}

    void expr(const Node& n, std::string& out) {
        switch (n.kind) {
            case Node::kEmpty: out += "\"\""; break;
            case Node::kNever: KIMI_CHECK(false, "regex: an unmatchable part survived simplification"); break;
            case Node::kChar:
                out += '"';
                literal(n.cp, out);
                out += '"';
                break;
            case Node::kClass: char_class(n.set, out); break;
            case Node::kSeq:
                for (size_t i = 0; i < n.kids.size(); ++i) {
                    if (i) out += ' ';
                    if (n.kids[i].kind != Node::kChar) {
                        expr(n.kids[i], out);
                        continue;
                    }
                    out += '"';   // a run of characters as one literal
                    for (; i < n.kids.size() && n.kids[i].kind == Node::kChar; ++i) literal(n.kids[i].cp, out);
                    out += '"';
                    --i;
                }
                break;
            case Node::kAlt:
                charge(1);
                out += '(';
                for (size_t i = 0; i < n.kids.size(); ++i) {
                    if (i) out += n.kids[i].kind == Node::kEmpty ? " |" : " | ";
                    if (n.kids[i].kind != Node::kEmpty) expr(n.kids[i], out);
                }
                out += ')';
                break;
            case Node::kRepeat: {
                const Node& k = n.kids[0];
                if (k.kind == Node::kChar || k.kind == Node::kClass || k.kind == Node::kAlt) {
                    expr(k, out);   // one element already
                } else {
                    charge(1);
                    out += '(';
                    expr(k, out);
                    out += ')';
                }
                charge(size_t(n.hi < 0 ? 1 : n.hi - n.lo) + size_t(n.lo));
                if (n.lo == 0 && n.hi < 0)
                    out += '*';
                else if (n.lo == 1 && n.hi < 0)
                    out += '+';
                else if (n.lo == 0 && n.hi == 1)
                    out += '?';
                else if (n.lo == n.hi)
                    out += '{' + std::to_string(n.lo) + '}';
                else
                    out += '{' + std::to_string(n.lo) + ',' + (n.hi < 0 ? "" : std::to_string(n.hi)) + '}';
                break;
            }
        }
    }

private:
    void charge(size_t k) {
        if ((rules_ += k) > kMaxRules) too_large();
    }
    static void hex_escape(uint32_t cp, std::string& out) {
        static const char* digits = "0123456789ABCDEF";
        const int n = cp < 0x80 ? 2 : cp <= 0xFFFF ? 4 : 8;
        out += n == 2 ? "\\x" : n == 4 ? "\\u" : "\\U";
        for (int i = n - 1; i >= 0; --i) out += digits[(cp >> (4 * i)) & 15];
    }
    // Characters that read well as themselves (printable ASCII, common scripts, CJK, emoji, no
    // invisible spacing or format characters); the rest are written as escapes.
    static bool plain(uint32_t cp) {
        if (cp >= 0x20 && cp < 0x7F) return true;
        if (cp == 0xAD || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
            (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || (cp >= 0xFE00 && cp <= 0xFE0F) || cp == 0xFEFF)
            return false;
        return (cp > 0xA0 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFFEF) || (cp >= 0x1F000 && cp <= 0x1FAFF) ||
            (cp >= 0x20000 && cp <= 0x3134F);
    }
    static void utf8(uint32_t cp, std::string& out) {
        if (cp < 0x80) {
            out += char(cp);
        } else if (cp < 0x800) {
            out += char(0xC0 | cp >> 6), out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | cp >> 12), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | cp >> 18), out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
        }
    }
    // One code point inside a GBNF "literal" or [class] (special: the characters in `special`).
    static void gbnf_char(uint32_t cp, std::string_view special, std::string& out) {
        if (cp < 0x80 && special.find(char(cp)) != std::string_view::npos) {
            out += '\\';
            out += char(cp);
        } else if (plain(cp)) {
            utf8(cp, out);
        } else {
            hex_escape(cp, out);
        }
    }
    // A pattern character inside a GBNF literal: itself, or its JSON encoding in JSON mode.
    void literal(uint32_t cp, std::string& out) const {
        if (!json_) return gbnf_char(cp, "\"\\", out);
        if (cp == '"' || cp == '\\') {
            out += "\\\\";
            out += cp == '"' ? "\\\"" : "\\\\";
        } else if (cp < 0x20) {
            out += "\\\\";
            const char short_form = cp == '\b' ? 'b'
                : cp == '\t'                   ? 't'
                : cp == '\n'                   ? 'n'
                : cp == '\f'                   ? 'f'
                : cp == '\r'                   ? 'r'
                                               : 0;
            if (short_form) {
                out += short_form;
            } else {
                static const char* digits = "0123456789abcdef";
                out += "u00";
                out += digits[cp >> 4];
                out += digits[cp & 15];
            }
        } else {
            gbnf_char(cp, "\"\\", out);
        }
    }
    void char_class(const Ranges& set, std::string& out) {
        if (!json_) return class_text(set, out);
        // JSON: '"' and '\' only as their escapes (control characters are already out)
        const bool quote = contains(set, '"'), backslash = contains(set, '\\');
        const Ranges rest = minus(set, {{'"', '"'}, {'\\', '\\'}});
        const int parts = int(!rest.empty()) + int(quote) + int(backslash);
        if (parts > 1) {
            charge(1);
            out += '(';
        }
        const char* sep = "";
        if (!rest.empty()) class_text(rest, out), sep = " | ";
        if (quote) out += sep, out += "\"\\\\\\\"\"", sep = " | ";
        if (backslash) out += sep, out += "\"\\\\\\\\\"";
        if (parts > 1) out += ')';
    }
    void class_text(const Ranges& set, std::string& out) {
        charge(1);
        const Ranges other = negated(set);
        if (other.empty()) {
            out += '.';
            return;
        }
        const bool neg = other.size() < set.size();
        out += neg ? "[^" : "[";
        for (const auto& [lo, hi] : neg ? other : set) {
            gbnf_char(lo, "\\]-[^", out);
            if (hi > lo + 1) out += '-';
            if (hi > lo) gbnf_char(hi, "\\]-[^", out);
        }
        out += ']';
    }

    bool json_;
    size_t rules_ = 0;
};

}   // namespace

std::string regex_to_gbnf(std::string_view pattern, RegexMode mode) {
    const bool json = mode == RegexMode::kJsonString;
    const Node root = RegexParser(pattern, json).parse();
    if (root.kind == Node::kNever)
        throw Error(
            json ? "regex: the pattern matches no string a JSON string may hold (classes exclude control characters)"
                 : "regex: the pattern matches no string");
    std::string out;
    Printer(json).expr(root, out);
    return out;
}

Grammar regex_grammar(std::string_view pattern) { return parse_grammar("root ::= " + regex_to_gbnf(pattern)); }

}   // namespace kimi::grammar
