// libFuzzer target: the grammar matcher (src/grammar/matcher.h) and the vocabulary walk
// (token_mask.h) on fixed grammars, driven by the fuzz bytes.
// Input: byte 0 % 6 picks the grammar (any JSON object; a JSON Schema; a regex; a GBNF with
// special tokens; a very ambiguous GBNF that hits the stack limits; a GBNF with deep
// recursion). Then each byte below 0xF8 is offered to the matcher as the next byte; the bytes
// 0xF8-0xFF are commands:
//   F8 k s..  accept(s) with |s| = k % 32 (all or nothing)
//   F9 b      advance() from the current stacks with byte b (the vocabulary walk's step)
//   FA        checkpoint a copy of the matcher      FB  roll back to the checkpoint
//   FC        token mask: TokenTrie::allowed over a small vocabulary (the first 4 FC)
//   FD k      accept a special token's bytes (0xFF name 0xFF), name k % 4
//   FE b, FF b  accept_byte(b) for any b (so bytes F8-FF can be fed too)
// Checked beyond "no crash": a refused byte or string changes nothing (same state key);
// accept(s) equals feeding s byte by byte; advance() agrees with accept_byte(); a live matcher
// has stacks; the trie's mask equals stepping every token's bytes from the matcher's stacks.
// Clean errors: none expected (the grammars are fixed and valid).
#include <optional>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/token_mask.h"

namespace {

using namespace kimi::grammar;
using kimi::fuzz::Input;

const char* const kSpecials[] = {"<|open|>", "<|close|>", "<|sep|>", "<|im_end|>"};

std::vector<Grammar> make_grammars() {
    std::vector<Grammar> g;
    g.push_back(parse_grammar(json_object_gbnf()));
    g.push_back(json_schema_grammar(nlohmann::ordered_json::parse(R"({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": -5, "maximum": 150},
            "score": {"type": "number", "exclusiveMinimum": 0.5},
            "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "maxItems": 3},
            "when": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "pattern": "^[a-f0-9]{4}(-[a-f0-9]{2})?$"},
            "kind": {"anyOf": [{"const": "x"}, {"type": "boolean"}, {"$ref": "#/$defs/node"}]}
        },
        "required": ["name"],
        "$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}}
    })")));
    g.push_back(regex_grammar(
        R"((\+|-)?\d{1,3}(,\d{3})*(\.\d+)?([eE][+-]?\d+)?|[a-zé中😀]+(\.[a-z]+)*@[^\s@]{1,5}\.(com|org))"));
    g.push_back(parse_grammar(R"G(
        root    ::= think? <|open|> "response" <|sep|> body <|close|> "response" <|sep|>
        think   ::= [^<]* <|close|> "think" <|sep|>
        body    ::= ([^<] | "<" [^|])* | "{" ws "\"a\"" ws ":" ws [0-9]+ ws "}"
        ws      ::= [ \t\n]{0,4}
    )G"));
    g.push_back(parse_grammar(R"G(
        root ::= item+ "!"?
        item ::= "a" | "aa" | "a" item | [a-c] [a-c]? | x
        x    ::= ("a" | "b")* "c"
    )G"));
    g.push_back(parse_grammar(R"G(
        root  ::= value
        value ::= "[" ws (value (ws "," ws value)*)? ws "]" | "(" value ")" | [0-9]+ | "\"" [^"\\]* "\""
        ws    ::= " "*
    )G"));
    return g;
}

// Printable ASCII and a few other single bytes, and pieces of JSON, UTF-8 and the markers (as
// the engine's vocabulary; small, as the mask check tries every token on its own).
std::vector<std::string> make_vocab() {
    std::vector<std::string> v;
    for (int b = 0x20; b < 0x7F; ++b) v.push_back(std::string(1, char(b)));
    for (int b : {0x00, 0x09, 0x0A, 0x0D, 0x7F, 0x80, 0xA9, 0xBF, 0xC3, 0xE4, 0xF0, 0xF4, 0xFE, 0xFF})
        v.push_back(std::string(1, char(b)));
    for (const char* s :
         {"{\"",      "\":",  "\", \"", "\": ", "true",   "false", "null",     "  ",    "\n",
          "123",      "-0.5", "e+1",    "]}",   "[\"a\"", "é",     "中",       "\xC3",  "\xA9",
          "\xF0\x9F", "😀",    "@x.com", ",000", "aa",     "abc",   "response", "think", "2024-01-02T03:04:05Z",
          "\"name\"", ""})
        v.push_back(s);
    for (const char* s : kSpecials) v.push_back(special_token_bytes(s));
    return v;
}

struct Fixture {
    std::vector<Grammar> grammars = make_grammars();
    std::vector<std::string> vocab = make_vocab();
    TokenTrie trie{vocab};
};

const Fixture& fixture() {
    static const Fixture f;
    return f;
}

std::string key_of(const Matcher& m) {
    std::string k;
    m.state_key(k);
    return k;
}

// accept_byte, checking that a refusal changes nothing.
void feed(Matcher& m, uint8_t b) {
    const std::string before = key_of(m);
    if (m.accept_byte(b)) {
        fuzz_assert(!m.dead(), "accepted a byte into a dead state");
    } else {
        fuzz_assert(key_of(m) == before, "a refused byte changed the matcher");
    }
}

void accept_string(Matcher& m, std::string_view s) {
    const std::string before = key_of(m);
    Matcher by_byte = m;
    bool all = true;
    for (char c : s)
        if (!(all = by_byte.accept_byte(uint8_t(c)))) break;
    const bool ok = m.accept(s);
    fuzz_assert(ok == all, "accept(s) != accepting s byte by byte");
    fuzz_assert(key_of(m) == (ok ? key_of(by_byte) : before), "accept(s) left another state");
}

void check_advance(const Matcher& m, uint8_t b) {
    StackSet to;
    const bool ok = m.advance(m.stacks(), b, to);
    Matcher copy = m;
    fuzz_assert(ok == copy.accept_byte(b), "advance() != accept_byte()");
    fuzz_assert(ok == !to.empty(), "advance() result vs its stacks");
}

void check_mask(const Matcher& m) {
    const Fixture& f = fixture();
    std::vector<uint8_t> allowed;
    f.trie.allowed(m, allowed);
    fuzz_assert(allowed.size() == f.vocab.size(), "mask size");
    StackSet a, b;
    for (size_t t = 0; t < f.vocab.size(); ++t) {   // each token's bytes stepped from the matcher's stacks
        bool direct = !f.vocab[t].empty();
        a = m.stacks();
        for (size_t i = 0; direct && i < f.vocab[t].size(); ++i) {
            direct = m.advance(a, uint8_t(f.vocab[t][i]), b);
            std::swap(a, b);
        }
        fuzz_assert(bool(allowed[t]) == direct, "trie mask != direct accept for token " + std::to_string(t));
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Fixture& f = fixture();
    Input in(data, size);
    const Grammar& g = f.grammars[in.byte() % f.grammars.size()];
    Matcher m(g);
    std::optional<Matcher> saved;
    int masks = 0;
    while (!in.empty()) {
        const uint8_t c = in.byte();
        if (c < 0xF8) {
            feed(m, c);
            continue;
        }
        switch (c) {
            case 0xF8: accept_string(m, in.take(in.byte() % 32)); break;
            case 0xF9: check_advance(m, in.byte()); break;
            case 0xFA: saved = m; break;
            case 0xFB:
                if (saved) m = *saved;
                break;
            case 0xFC:   // at most 4 per input (each costs a few hundred steps)
                if (masks++ < 4) check_mask(m);
                break;
            case 0xFD: accept_string(m, special_token_bytes(kSpecials[in.byte() % 4])); break;
            default: feed(m, in.byte()); break;
        }
        fuzz_assert(m.n_stacks() <= StackSet::kMaxStacks, "more stacks than kMaxStacks");
        fuzz_assert(m.can_end() == Matcher::can_end(m.stacks()), "can_end");
    }
    return 0;
}
