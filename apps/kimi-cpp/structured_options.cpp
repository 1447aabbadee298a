// Structured output flags (see structured_options.h).
#include "structured_options.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_depth.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "text_io.h"

namespace kimi::app {

StructuredOption parse_structured_options(ArgParser& args) {
    const auto schema_file = args.opt("--json-schema");
    const auto regex = args.opt("--regex");
    const auto grammar_file = args.opt("--grammar");
    const auto choice = args.opt("--choice");
    const int given = int(bool(schema_file)) + int(bool(regex)) + int(bool(grammar_file)) + int(bool(choice));
    StructuredOption out;
    if (given == 0) return out;
    if (given > 1) throw Error("give at most one of --json-schema, --regex, --grammar, --choice");
    const auto t0 = std::chrono::steady_clock::now();
    grammar::Grammar g;
    if (schema_file) {
        const std::string text = read_all(*schema_file);
        if (!json_depth_within(text))
            throw Error("--json-schema: " + *schema_file + " is nested deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels");
        const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
        if (schema.is_discarded()) throw Error("--json-schema: " + *schema_file + " is not valid JSON");
        try {
            g = grammar::json_schema_grammar(schema);
        } catch (const Error& e) {
            throw Error("--json-schema " + *schema_file + ": " + e.what());
        }
    } else if (regex) {
        try {
            g = grammar::regex_grammar(*regex);
        } catch (const Error& e) {
            throw Error(std::string("--regex: ") + e.what());
        }
    } else if (grammar_file) {
        try {
            g = grammar::parse_grammar(read_all(*grammar_file));
        } catch (const Error& e) {
            throw Error("--grammar " + *grammar_file + ": " + e.what());
        }
    } else {
        std::vector<std::string> choices;
        size_t from = 0;
        for (;;) {   // comma-separated; "\," is a comma inside a choice
            std::string one;
            size_t i = from;
            for (; i < choice->size() && (*choice)[i] != ','; ++i) {
                if ((*choice)[i] == '\\' && i + 1 < choice->size() && (*choice)[i + 1] == ',') ++i;
                one += (*choice)[i];
            }
            choices.push_back(one);
            if (i >= choice->size()) break;
            from = i + 1;
        }
        try {
            g = grammar::choice_grammar(choices);
        } catch (const Error& e) {
            throw Error(std::string("--choice: ") + e.what());
        }
    }
    out.structured = std::make_shared<StructuredOutput>(std::move(g));
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}   // namespace kimi::app
