// libFuzzer target: the grammar compilers (src/grammar) on arbitrary text.
// Input: byte 0 % 5 picks the compiler, the rest is its text:
//   0  GBNF (parse_grammar, with the server's 100,000-rule bound)
//   1  regex → GBNF, text mode (regex_to_gbnf, then parse_grammar of "root ::= " + it)
//   2  regex → GBNF, JSON-string mode (as a schema's `pattern` is compiled)
//   3  JSON Schema (the text parsed as the server parses a schema given as text, then
//      json_schema_to_gbnf and parse_grammar)
//   4  choice (one choice per line)
// A compiled grammar must validate, and a matcher is started on it and fed the input's bytes
// (the matcher's settle/advance on every shape of grammar the compilers produce).
// Checked beyond "no crash": what regex_to_gbnf and json_schema_to_gbnf print always parses
// (only the documented size bounds may refuse it).
// Clean errors: kimi::Error (and, for mode 3, text that is not JSON).
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/json_linear.h"
#include "fuzz_util.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace {

using namespace kimi::grammar;
using kimi::fuzz::Input;

constexpr size_t kMaxRules = 100000;   // the server's bound (src/server/structured_request.cpp)

// Only the documented size bounds may refuse what a compiler printed (and, for a schema, a
// $ref that recurses before writing anything: json_schema_grammar reports it so).
bool allowed_refusal(const kimi::Error& e, bool schema) {
    const std::string w = e.what();
    return w.find("expands to more than") != std::string::npos || w.find("repetition too large") != std::string::npos ||
        (schema && w.find("left-recursive") != std::string::npos);
}

// parse_grammar of text a compiler printed: a syntax error there is a compiler bug.
Grammar parse_printed(const std::string& gbnf, const char* who, bool schema = false) {
    try {
        return parse_grammar(gbnf, kMaxRules);
    } catch (const kimi::Error& e) {
        if (allowed_refusal(e, schema)) throw;
        kimi::fuzz::fail(who, std::string(e.what()) + "\n--- printed GBNF ---\n" + gbnf.substr(0, 4000));
    }
}

void exercise(const Grammar& g, std::string_view probe) {
    g.validate();
    Matcher m(g);
    for (char c : probe.substr(0, 256)) {
        if (!m.accept_byte(uint8_t(c))) break;
        (void)m.can_end();
    }
}

Grammar compile(int mode, const std::string& text) {
    switch (mode) {
        case 0: return parse_grammar(text, kMaxRules);
        case 1:
            return parse_printed("root ::= " + regex_to_gbnf(text, RegexMode::kText),
                                 "regex_to_gbnf (text) printed bad GBNF");
        case 2:
            return parse_printed("root ::= \"\\\"\" (" + regex_to_gbnf(text, RegexMode::kJsonString) + ") \"\\\"\"",
                                 "regex_to_gbnf (JSON string) printed bad GBNF");
        case 3: {
            if (!kimi::json_depth_within(text)) throw kimi::Error("nested too deeply");   // the server refuses it so
            nlohmann::ordered_json schema;
            try {
                schema = kimi::parse_json_linear(text);
            } catch (const nlohmann::json::exception&) {
                throw kimi::Error("not JSON");
            }
            return parse_printed(json_schema_to_gbnf(schema), "json_schema_to_gbnf printed bad GBNF", true);
        }
        default: {
            std::vector<std::string> choices;
            size_t at = 0;
            while (at <= text.size()) {
                const size_t nl = std::min(text.find('\n', at), text.size());
                choices.push_back(text.substr(at, nl - at));
                at = nl + 1;
            }
            return choice_grammar(choices);
        }
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in(data, size);
    const int mode = in.byte() % 5;
    const std::string text(in.rest());
    try {
        const Grammar g = compile(mode, text);
        exercise(g, text);
    } catch (const kimi::Error& e) {
        kimi::fuzz::note_refusal(e.what());
    }
    return 0;
}
