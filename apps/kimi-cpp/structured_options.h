// Structured output flags of `generate` (at most one): --json-schema FILE, --regex R,
// --grammar FILE (GBNF), --choice a,b,c. The grammar is compiled once, before the model runs.
#pragma once
#include <memory>

#include "args.h"
#include "runtime/structured_output.h"

namespace kimi::app {

struct StructuredOption {
    std::shared_ptr<const StructuredOutput> structured;   // null: free text
    double compile_ms = 0.0;
};

// Throws kimi::Error naming the flag on a bad file, schema, regex or grammar.
StructuredOption parse_structured_options(ArgParser& args);

}   // namespace kimi::app
