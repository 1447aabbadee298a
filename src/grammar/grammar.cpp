// Grammar builders, validation and the GBNF parser (see grammar.h).
#include "grammar/grammar.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace kimi::grammar {

int32_t Grammar::add_rule(const std::string& name) {
    rules.push_back(Rule{name, {}});
    return int32_t(rules.size()) - 1;
}

int32_t Grammar::add_char_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, bool negated) {
    const int32_t r = add_rule("class" + std::to_string(rules.size()));
    for (const auto& [lo, hi] : negated ? complement(ranges) : ranges)
        for (const Utf8Sequence& seq : utf8_sequences(lo, hi)) {
            Alternative alt;
            for (const ByteRange& b : seq) alt.push_back(byte_range(b.lo, b.hi));
            rules[size_t(r)].alts.push_back(std::move(alt));
        }
    return r;
}

void Grammar::append_literal(Alternative& alt, const std::string& utf8) const {
    for (unsigned char c : utf8) alt.push_back(byte_range(c, c));
}

int32_t Grammar::splice(const Grammar& other) {
    const int32_t base = int32_t(rules.size());
    for (Rule r : other.rules) {
        for (Alternative& a : r.alts)
            for (Symbol& s : a)
                if (s.rule >= 0) s.rule += base;
        rules.push_back(std::move(r));
    }
    return base + other.root;
}

int32_t Grammar::add_star(const Alternative& item, const std::string& name) {
    const int32_t r = add_rule(name);
    Alternative more = item;
    more.push_back(ref(r));
    rules[size_t(r)].alts = {std::move(more), {}};
    return r;
}

void Grammar::validate() const {
    const size_t n = rules.size();
    if (root < 0 || size_t(root) >= n) throw Error("grammar: no root rule");
    for (const Rule& r : rules) {
        if (r.alts.empty()) throw Error("grammar: rule '" + r.name + "' matches nothing");
        for (const Alternative& a : r.alts)
            for (const Symbol& s : a)
                if (s.rule >= int32_t(n)) throw Error("grammar: rule '" + r.name + "' refers to a missing rule");
    }
    // nullable rules (can match the empty string), in time linear in the grammar: each
    // alternative counts its symbols not yet known to be nullable (a byte never is); a rule
    // found nullable lowers the counts of the alternatives that use it. (A fixed point over
    // passes in rule order needs a pass per rule of a chain written backwards: O(n²).)
    std::vector<char> nullable(n, 0);
    std::vector<int32_t> alt_rule, pending;         // per alternative: its rule, its count
    std::vector<std::vector<int32_t>> used_in(n);   // per rule: the alternatives using it
    std::vector<int32_t> found;                     // nullable rules not yet propagated
    for (size_t i = 0; i < n; ++i)
        for (const Alternative& a : rules[i].alts) {
            const int32_t id = int32_t(pending.size());
            const bool bytes = std::any_of(a.begin(), a.end(), [](const Symbol& s) { return s.rule < 0; });
            alt_rule.push_back(int32_t(i));
            pending.push_back(bytes ? -1 : int32_t(a.size()));
            if (bytes) continue;
            for (const Symbol& s : a) used_in[size_t(s.rule)].push_back(id);
            if (a.empty() && !nullable[i]) {
                nullable[i] = 1;
                found.push_back(int32_t(i));
            }
        }
    while (!found.empty()) {
        const int32_t r = found.back();
        found.pop_back();
        for (const int32_t id : used_in[size_t(r)]) {
            const int32_t owner = alt_rule[size_t(id)];
            if (--pending[size_t(id)] == 0 && !nullable[size_t(owner)]) {
                nullable[size_t(owner)] = 1;
                found.push_back(owner);
            }
        }
    }
    // left recursion: a rule reachable from itself through symbols that may consume nothing
    std::vector<std::vector<int32_t>> starts(n);
    for (size_t i = 0; i < n; ++i)
        for (const Alternative& a : rules[i].alts)
            for (const Symbol& s : a) {
                if (s.rule < 0) break;
                starts[i].push_back(s.rule);
                if (!nullable[size_t(s.rule)]) break;
            }
    std::vector<char> state(n, 0);   // 0 new, 1 on the path, 2 done
    std::vector<std::pair<int32_t, size_t>> path;
    for (size_t s0 = 0; s0 < n; ++s0) {
        if (state[s0]) continue;
        path.push_back({int32_t(s0), 0});
        state[s0] = 1;
        while (!path.empty()) {
            auto& [r, k] = path.back();
            if (k == starts[size_t(r)].size()) {
                state[size_t(r)] = 2;
                path.pop_back();
                continue;
            }
            const int32_t next = starts[size_t(r)][k++];
            if (state[size_t(next)] == 1)
                throw Error("grammar: rule '" + rules[size_t(next)].name + "' is left-recursive");
            if (state[size_t(next)] == 0) {
                state[size_t(next)] = 1;
                path.push_back({next, 0});
            }
        }
    }
}

namespace {

constexpr int kMaxGroupNesting = 100;   // ( ... ) inside each other: the parser recurses per level

class Parser {
public:
    Parser(const std::string& text, size_t max_rules, const CompilePoll& poll)
        : s_(text), max_rules_(max_rules), poll_(poll) {}

    Grammar parse() {
        skip();
        while (pos_ < s_.size()) {
            const std::string name = ident();
            skip();
            if (s_.compare(pos_, 3, "::=") != 0) fail("expected '::=' after rule name '" + name + "'");
            pos_ += 3;
            const int32_t r = named(name);
            if (defined_.count(name)) fail("rule '" + name + "' is defined twice");
            defined_[name] = true;
            g_.rules[size_t(r)].alts = alternatives(0);
            skip();
        }
        for (const auto& [name, r] : by_name_)
            if (!defined_.count(name)) throw Error("grammar: rule '" + name + "' is used but not defined");
        const auto root = by_name_.find("root");
        if (root == by_name_.end()) throw Error("grammar: no rule named 'root'");
        g_.root = root->second;
        g_.validate();
        return std::move(g_);
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        int line = 1, col = 1;
        for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
            if (s_[i] == '\n')
                ++line, col = 1;
            else
                ++col;
        }
        throw Error("grammar: " + what + " (line " + std::to_string(line) + ", column " + std::to_string(col) + ")");
    }
    void skip() {   // spaces, newlines and # comments
        while (pos_ < s_.size()) {
            if (s_[pos_] == '#') {
                while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
            } else if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
                ++pos_;
            } else {
                break;
            }
        }
    }
    static bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }
    std::string ident() {
        const size_t b = pos_;
        while (pos_ < s_.size() && ident_char(s_[pos_])) ++pos_;
        if (b == pos_) fail("expected a rule name");
        return s_.substr(b, pos_ - b);
    }
    bool at_definition() const {   // `name ::=` ahead: the current rule ended
        size_t p = pos_;
        while (p < s_.size() && ident_char(s_[p])) ++p;
        if (p == pos_) return false;
        while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
        return s_.compare(p, 3, "::=") == 0;
    }
    int32_t named(const std::string& name) {
        auto it = by_name_.find(name);
        if (it != by_name_.end()) return it->second;
        const int32_t r = fresh(name);
        by_name_[name] = r;
        return r;
    }
    void check_room() const {
        if (g_.rules.size() >= max_rules_)
            fail("the grammar expands to more than " + std::to_string(max_rules_) + " rules");
    }
    int32_t fresh(const std::string& name) {
        check_room();
        return g_.add_rule(name);
    }

    std::vector<Alternative> alternatives(int depth) {
        std::vector<Alternative> alts;
        for (;;) {
            alts.push_back(sequence(depth));
            skip();
            if (pos_ < s_.size() && s_[pos_] == '|') {
                ++pos_;
                continue;
            }
            return alts;
        }
    }
    Alternative sequence(int depth) {
        Alternative seq;
        for (;;) {
            skip();
            if (pos_ >= s_.size()) break;
            const char c = s_[pos_];
            if (c == '|' || (c == ')' && depth > 0)) break;
            if (c == ')') fail("unbalanced ')'");
            if (depth == 0 && at_definition()) break;
            if (poll_ && (++elements_ & 4095) == 0) poll_();
            Alternative item = element(depth);
            item = postfix(std::move(item));
            seq.insert(seq.end(), item.begin(), item.end());
        }
        return seq;
    }
    // One element as the symbols it stands for.
    Alternative element(int depth) {
        const char c = s_[pos_];
        Alternative out;
        if (c == '"') {
            ++pos_;
            std::string lit;
            while (pos_ < s_.size() && s_[pos_] != '"') append_utf8(lit, char_or_escape());
            if (pos_ >= s_.size()) fail("unterminated string");
            ++pos_;
            g_.append_literal(out, lit);
        } else if (c == '[') {
            ++pos_;
            const bool negated = pos_ < s_.size() && s_[pos_] == '^';
            if (negated) ++pos_;
            std::vector<std::pair<uint32_t, uint32_t>> ranges;
            while (pos_ < s_.size() && s_[pos_] != ']') {
                const uint32_t lo = char_or_escape();
                uint32_t hi = lo;
                if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
                    ++pos_;
                    hi = char_or_escape();
                    if (hi < lo) fail("character range out of order");
                }
                ranges.push_back({lo, hi});
            }
            if (pos_ >= s_.size()) fail("unterminated character class");
            ++pos_;
            out.push_back(Grammar::ref(char_class(std::move(ranges), negated)));
        } else if (c == '<' && s_.compare(pos_, 2, "<|") == 0) {
            // a special token, <|name|>: its bytes wrapped in 0xFF, which no text contains (token_mask.h)
            const size_t end = s_.find("|>", pos_ + 2);
            if (end == std::string::npos) fail("unterminated special token '<|...|>'");
            out.push_back(Grammar::byte_range(kSpecialByte, kSpecialByte));
            g_.append_literal(out, s_.substr(pos_, end + 2 - pos_));
            out.push_back(Grammar::byte_range(kSpecialByte, kSpecialByte));
            pos_ = end + 2;
        } else if (c == '.') {
            ++pos_;
            out.push_back(Grammar::ref(char_class({}, true)));
        } else if (c == '(') {
            if (depth >= kMaxGroupNesting)
                fail("groups nested deeper than " + std::to_string(kMaxGroupNesting) + " levels");
            ++pos_;
            const int32_t r = fresh("group" + std::to_string(g_.rules.size()));
            auto alts = alternatives(depth + 1);
            skip();
            if (pos_ >= s_.size() || s_[pos_] != ')') fail("expected ')'");
            ++pos_;
            g_.rules[size_t(r)].alts = std::move(alts);
            out.push_back(Grammar::ref(r));
        } else if (ident_char(c)) {
            out.push_back(Grammar::ref(named(ident())));
        } else {
            fail(std::string("unexpected '") + c + "'");
        }
        return out;
    }
    int32_t char_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
        std::sort(ranges.begin(), ranges.end());
        std::vector<std::pair<uint32_t, uint32_t>> merged;
        for (const auto& r : ranges) {
            if (!merged.empty() && r.first <= merged.back().second + 1)
                merged.back().second = std::max(merged.back().second, r.second);
            else
                merged.push_back(r);
        }
        const auto key = std::make_pair(merged, negated);
        if (auto it = classes_.find(key); it != classes_.end()) return it->second;
        check_room();
        const int32_t r = g_.add_char_class(merged, negated);
        if (g_.rules[size_t(r)].alts.empty()) fail("a character class that matches no character");
        classes_[key] = r;
        return r;
    }
    // item followed by * + ? {m} {m,} {m,n}: rewritten with new rules.
    Alternative postfix(Alternative item) {
        for (;;) {
            if (pos_ >= s_.size()) return item;
            const char c = s_[pos_];
            int64_t lo = 0, hi = -1;   // hi −1: unbounded
            if (c == '*') {
                ++pos_;
            } else if (c == '+') {
                ++pos_, lo = 1;
            } else if (c == '?') {
                ++pos_, hi = 1;
            } else if (c == '{') {
                ++pos_;
                lo = number();
                hi = lo;
                if (pos_ < s_.size() && s_[pos_] == ',') {
                    ++pos_;
                    hi = pos_ < s_.size() && s_[pos_] == '}' ? -1 : number();
                }
                if (pos_ >= s_.size() || s_[pos_] != '}') fail("expected '}'");
                ++pos_;
                if (hi >= 0 && hi < lo) fail("repetition {m,n} with n < m");
            } else {
                return item;
            }
            item = repeat(item, lo, hi);
        }
    }
    int64_t number() {
        const size_t b = pos_;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        if (b == pos_ || pos_ - b > 6) fail("expected a repetition count");
        return std::stoll(s_.substr(b, pos_ - b));
    }
    Alternative repeat(const Alternative& item, int64_t lo, int64_t hi) {
        if (lo + (hi < 0 ? 1 : hi - lo) > int64_t(max_rules_)) fail("repetition too large");
        // the symbols repetition writes (item copied lo times inline, once per optional rule),
        // bounded over the whole grammar: per alternative only, 150 × "a"{1000}{1000} (2.4 KB)
        // grew to 150 M symbols (> 2 GB)
        repeated_ += int64_t(item.size()) * (lo + (hi < 0 ? 1 : hi - lo));
        if (repeated_ > int64_t(max_rules_) * 16) fail("repetition too large");
        Alternative out;
        for (int64_t i = 0; i < lo; ++i) out.insert(out.end(), item.begin(), item.end());
        if (hi < 0) {   // R ::= item R | ε   (right recursion: the matcher tail-calls it)
            check_room();
            out.push_back(Grammar::ref(g_.add_star(item, "star" + std::to_string(g_.rules.size()))));
        } else {   // up to hi − lo more: R_k ::= item R_{k−1} | ε
            int32_t prev = -1;
            for (int64_t k = 0; k < hi - lo; ++k) {
                const int32_t r = fresh("opt" + std::to_string(g_.rules.size()));
                Alternative one = item;
                if (prev >= 0) one.push_back(Grammar::ref(prev));
                g_.rules[size_t(r)].alts = {std::move(one), {}};
                prev = r;
            }
            if (prev >= 0) out.push_back(Grammar::ref(prev));
        }
        return out;
    }
    uint32_t char_or_escape() {
        if (s_[pos_] != '\\') return next_utf8();
        if (++pos_ >= s_.size()) fail("dangling '\\'");
        const char e = s_[pos_++];
        switch (e) {
            case 'n': return '\n';
            case 't': return '\t';
            case 'r': return '\r';
            case '0': return 0;
            case 'x': return hex(2);
            case 'u': return hex(4);
            case 'U': return hex(8);
            default: return uint32_t(static_cast<unsigned char>(e));   // \" \\ \] \[ \- and the like
        }
    }
    uint32_t hex(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i, ++pos_) {
            if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_]))) fail("expected a hex digit");
            const char c = char(std::tolower(static_cast<unsigned char>(s_[pos_])));
            v = v * 16 + uint32_t(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail("escape is not a Unicode scalar value");
        return v;
    }
    uint32_t next_utf8() {   // one code point of the grammar text
        const auto b0 = static_cast<unsigned char>(s_[pos_]);
        const int n = b0 < 0x80 ? 1 : b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
        if (n == 0 || pos_ + size_t(n) > s_.size()) fail("invalid UTF-8 in the grammar");
        uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
        for (int i = 1; i < n; ++i) cp = cp << 6 | (static_cast<unsigned char>(s_[pos_ + size_t(i)]) & 0x3F);
        pos_ += size_t(n);
        return cp;
    }
    static void append_utf8(std::string& out, uint32_t cp) {
        uint8_t b[4];
        int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (n == 1)
            b[0] = uint8_t(cp);
        else {
            for (int i = n - 1; i > 0; --i) b[i] = uint8_t(0x80 | (cp & 0x3F)), cp >>= 6;
            b[0] = uint8_t((0xF00 >> n) | cp);
        }
        out.append(reinterpret_cast<const char*>(b), size_t(n));
    }

    const std::string& s_;
    size_t max_rules_;
    const CompilePoll& poll_;
    uint64_t elements_ = 0;   // elements read so far (the poll's clock)
    int64_t repeated_ = 0;    // symbols written by repetition so far (see repeat)
    size_t pos_ = 0;
    Grammar g_;
    std::map<std::string, int32_t> by_name_;
    std::map<std::string, bool> defined_;
    std::map<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, bool>, int32_t> classes_;
};

}   // namespace

Grammar parse_grammar(const std::string& text, size_t max_rules, const CompilePoll& poll) {
    return Parser(text, max_rules, poll).parse();
}

std::string gbnf_literal(std::string_view bytes) {
    std::string out = "\"";
    for (const char ch : bytes) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20 || c == 0x7F) {
            static const char* hex = "0123456789ABCDEF";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

Grammar choice_grammar(const std::vector<std::string>& choices) {
    if (choices.empty()) throw Error("choice: give at least one string");
    Grammar g;
    g.root = g.add_rule("root");
    for (const std::string& c : choices) {
        if (c.empty()) throw Error("choice: the strings must not be empty");
        Alternative alt;
        g.append_literal(alt, c);
        g.rules[size_t(g.root)].alts.push_back(std::move(alt));
    }
    g.validate();
    return g;
}

}   // namespace kimi::grammar
