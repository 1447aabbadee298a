// JSON Schema → grammar: the GBNF text of the JSON values a schema accepts, compact (at most
// one space after ':' and ','), with properties in the schema's order. Supported: type (and
// lists of types), properties / required / additionalProperties (false, true, a schema; not
// given: no extra properties when `properties` lists some, as OpenAI's strict mode and
// xgrammar), enum, const, items / prefixItems / minItems / maxItems, anyOf / oneOf (as anyOf:
// the branches should be disjoint), allOf (merged), $ref into the document (#, #/$defs/…,
// #/definitions/…, recursion included), nullable, string minLength / maxLength / pattern
// (regex.h) / format (date, time, date-time, duration, uuid, email, hostname, ipv4, ipv6),
// integer and number bounds (a number's bounds are met by its integer part: the grammar only
// writes values inside them). Annotations (title, description, default, examples, $schema,
// $id, $comment, deprecated, readOnly, writeOnly, strict) are ignored; any other keyword is
// an error naming it. ref: docs/server.md "Structured output".
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace kimi::grammar {

// GBNF text whose `root` matches the JSON texts valid under `schema` (a JSON object or a
// boolean). Throws kimi::Error "json_schema: … 'keyword' … at /path" for an unsupported or
// malformed keyword (a `required` name listed twice, a `type` list with a repeat included),
// and for a schema whose grammar would pass max_rules rules or 64 MiB of text. Time linear in
// the schema (hash lookups for names); `poll` is called now and then (it stops the work by
// throwing).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, size_t max_rules = 100000,
                                const CompilePoll& poll = {});

// The GBNF of any JSON object (response_format json_object).
std::string json_object_gbnf();

// parse_grammar(json_schema_to_gbnf(schema), max_rules); errors as above.
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, size_t max_rules = 100000,
                            const CompilePoll& poll = {});

}   // namespace kimi::grammar
