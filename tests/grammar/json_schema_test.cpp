// JSON Schema → grammar: for each schema, JSON texts the grammar must accept (valid and
// compact) and texts it must refuse (invalid under the schema, or outside the compact form);
// number ranges checked against the bounds on every integer near them; unsupported and
// malformed keywords are errors naming the keyword.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/json_number_range.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "grammar_test_util.h"

namespace kimi::grammar {
namespace {

using json = nlohmann::ordered_json;

struct Case {
    const char* schema;
    std::vector<std::string> accept, refuse;
};

TEST(JsonSchema, AcceptsAndRefuses) {
    const std::vector<Case> cases = {
        {R"({"type":"string"})",
         {R"("")", R"("abc")", R"("a\"b\\c\n")", R"("\u00e9")", "\"日本\""},
         {R"(abc)", R"("a)", "\"a\nb\"", R"("\ud800")", R"(1)"}},
        {R"({"type":"integer"})", {"0", "-7", "123456"}, {"01", "1.5", "\"1\"", "+1", "-"}},
        {R"({"type":"number"})", {"0", "-0.5", "3.25", "1e5", "2E-3"}, {".5", "1.", "01", "1e"}},
        {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
        {R"({"type":"null"})", {"null"}, {"nil", ""}},
        {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
        {R"({"enum":["a",1,null,{"k":[1]}]})", {R"("a")", "1", "null", R"({"k":[1]})"}, {R"("b")", "2"}},
        {R"({"const":"fixed"})", {R"("fixed")"}, {R"("fixe")"}},
        {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})",
         {R"({"a":1})", R"({"a":1,"b":"x"})", R"({"a": 1, "b": "x"})"},
         {R"({})", R"({"b":"x"})", R"({"b":"x","a":1})", R"({"a":1,"c":2})", R"({"a":1,  "b":"x"})"}},
        {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})",
         {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
         {R"({,"b":2})", R"({"a":1,})"}},
        {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})",
         {R"({"a":1,"xy":true})", R"({"xyz":false})", "{}"},
         {R"({"a":1,"x":true})", R"({"xy":1})"}},
        {R"({"type":"object"})", {"{}", R"({"x":[1,{"y":null}]})"}, {"[]"}},
        {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
         {"[1]", "[1,2,3]", "[1, 2]"},
         {"[]", "[1,2,3,4]", "[1,]"}},
        {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
         {"[]", R"(["a"])", R"(["a",1])"},
         {R"(["a",1,2])", "[1]"}},
        {R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},"minItems":2})",
         {R"(["a",1])", R"(["a",1,2])"},
         {R"(["a"])", "[]"}},
        {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})", {"5", R"("ab")"}, {R"("abc")", "true"}},
        {R"({"oneOf":[{"const":1},{"const":2}]})", {"1", "2"}, {"3"}},
        {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]})",
         {R"({"a":1,"b":"x"})"},
         {R"({"a":1})", R"({"b":"x"})"}},
        {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"]}},"$ref":"#/$defs/node"})",
         {R"({"v":1})", R"({"v":1,"next":{"v":2,"next":{"v":3}}})"},
         {R"({"v":1,"next":{}})"}},
        {R"({"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"},"maxItems":2}}})",
         {"{}", R"({"kids":[{},{"kids":[]}]})"},
         {R"({"kids":[1]})"}},
        {R"({"definitions":{"n":{"type":"integer","nullable":true}},"$ref":"#/definitions/n"})",
         {"3", "null"},
         {R"("3")"}},
        {R"({"type":"string","minLength":2,"maxLength":3})",
         {R"("ab")", R"("a\"c")", "\"日本語\""},
         {R"("a")", R"("abcd")"}},
        {R"({"type":"string","pattern":"^[a-z]{2}\\d$"})", {R"("ab1")"}, {R"("ab")", R"("AB1")", R"("ab12")"}},
        {R"({"type":"string","format":"date"})",
         {R"("2024-02-28")", R"("1999-12-31")"},
         {R"("2024-13-01")", R"("2024-02-30")", R"("24-01-01")"}},
        {R"({"type":"string","format":"date-time"})",
         {R"("2024-01-02T03:04:05Z")", R"("2024-01-02T03:04:05.123+01:00")"},
         {R"("2024-01-02 03:04:05Z")"}},
        {R"({"type":"string","format":"uuid"})",
         {R"("123e4567-e89b-12d3-a456-426614174000")"},
         {R"("123e4567e89b12d3a456426614174000")"}},
        {R"({"type":"string","format":"email"})", {R"("a.b@example.com")"}, {R"("a@b")", R"("@x.com")"}},
        {R"({"type":"integer","minimum":-5,"maximum":12})", {"-5", "0", "12", "9"}, {"-6", "13", "-0", "100"}},
        {R"({"type":"integer","exclusiveMinimum":0})", {"1", "99999"}, {"0", "-1"}},
        {R"({"type":"number","minimum":0,"maximum":1})", {"0", "1", "0.5"}, {"1.5", "-0.1", "2"}},
        {R"({"title":"T","description":"d","$schema":"https://json-schema.org/draft/2020-12/schema","type":"boolean"})",
         {"true"},
         {}},
        {R"({"type":"object","properties":{"a\"b":{"const":1},"é":{"const":2}},"required":["a\"b","é"]})",
         {R"({"a\"b":1,"é":2})"},
         {}},
        {"true", {"1", R"({"a":[]})"}, {}},
        {R"({"type":"string","enum":["a",1,"b"]})", {R"("a")", R"("b")"}, {"1"}},
        {R"({"type":"object","anyOf":[{"type":"string"},{"properties":{"k":{"const":1}},"required":["k"]}]})",
         {R"({"k":1})"},
         {R"("s")"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.schema);
        const Grammar g = json_schema_grammar(json::parse(c.schema));
        for (const std::string& t : c.accept) EXPECT_TRUE(full_match(g, t)) << "should accept " << t;
        for (const std::string& t : c.refuse) EXPECT_FALSE(full_match(g, t)) << "should refuse " << t;
    }
}

TEST(JsonSchema, ErrorsNameTheKeyword) {
    const std::vector<std::pair<const char*, const char*>> cases = {
        {R"({"type":"object","patternProperties":{"a":{}}})", "patternProperties"},
        {R"({"type":"array","uniqueItems":true})", "uniqueItems"},
        {R"({"not":{"type":"string"}})", "not"},
        {R"({"if":{},"then":{}})", "if"},
        {R"({"type":"number","multipleOf":2})", "multipleOf"},
        {R"({"type":"strin"})", "type"},
        {R"({"type":"object","properties":{"a":{}},"required":"a"})", "required"},
        {R"({"type":"string","minLength":5,"maxLength":2})", "minLength"},
        {R"({"$ref":"#/$defs/missing"})", "$ref"},
        {R"({"enum":[]})", "enum"},
        {R"({"type":"string","pattern":"(a"})", "pattern"},
        {R"({"type":"string","format":"phone"})", "format"},
        {R"({"$ref":"#"})", "$ref"},
        {R"({"type":"integer","minimum":5,"maximum":4})", "minimum"},
        {"false", "false"},
    };
    for (const auto& [schema, keyword] : cases) {
        SCOPED_TRACE(schema);
        try {
            json_schema_grammar(json::parse(schema));
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(keyword), std::string::npos) << e.what();
        }
    }
}

// Issue 56: `required` was checked with a linear scan of `properties` per name (100,000 of each:
// 12.75 s before the 400), and a name listed twice was accepted. Each step is a hash lookup
// now: the largest such schema a default request can hold (16 MiB) is refused in well under a
// second, a repeat in `required` or `type` is an error naming it, and so is a schema whose
// grammar would pass the rule limit.
TEST(JsonSchema, LargeSchemasCompileInLinearTime) {
    const auto object = [](int n, bool repeat) {
        json props = json::object(), req = json::array();
        auto& obj = props.get_ref<json::object_t&>();   // appended in place: no lookup per key
        for (int i = 0; i < n; ++i) {
            obj.emplace_back("p" + std::to_string(i), json{{"type", "integer"}});
            req.push_back("p" + std::to_string(repeat ? 0 : i));
        }
        return json{{"type", "object"}, {"properties", std::move(props)}, {"required", std::move(req)}};
    };
    for (const int n : {2000, 100000, 600000}) {   // up to 4 MB and 20 MB of schema text
        for (const bool repeat : {false, true}) {
            if (n == 2000 && !repeat) continue;                // compiles (below)
            if (n > 100000 && kSecondsScale > 1.0) continue;   // the sanitizer build: 4 MB is enough
            const json schema = object(n, repeat);
            const auto t0 = std::chrono::steady_clock::now();
            try {
                json_schema_grammar(schema);
                ADD_FAILURE() << "compiled";
            } catch (const Error& e) {
                const std::string what = e.what();
                EXPECT_NE(what.find(repeat && n == 2000 ? "twice" : "too large"), std::string::npos) << what;
            }
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            EXPECT_LT(s, 1.0 * kSecondsScale) << n << " properties" << (repeat ? ", a required name repeated" : "");
        }
    }
    // allOf merges properties and required lists by hash too: 50,000 a side
    json a = object(50000, false), b = object(50000, false);
    const json merged = json{{"allOf", json::array({a, b})}};
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(json_schema_grammar(merged), Error);   // past the rule limit, after a linear merge
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0 * kSecondsScale);
    EXPECT_NO_THROW(json_schema_grammar(object(2000, false)));
    try {
        json_schema_grammar(json::parse(R"({"type":["string","integer","string"]})"));
        ADD_FAILURE() << "a repeated type compiled";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("distinct"), std::string::npos) << e.what();
    }
}

// The poll (a client gone, a deadline passed) stops a compile from inside: what it throws comes
// out, and a schema small enough to finish between two polls never sees it.
TEST(JsonSchema, ThePollStopsTheCompile) {
    struct Stopped {};
    int polls = 0;
    const CompilePoll poll = [&polls] {
        if (++polls == 3) throw Stopped{};
    };
    json props = json::object();
    for (int i = 0; i < 5000; ++i) props["p" + std::to_string(i)] = json{{"enum", json::array({1, 2, 3})}};
    const json big{{"type", "object"}, {"properties", props}};
    EXPECT_THROW(json_schema_grammar(big, 100000, poll), Stopped);
    EXPECT_EQ(polls, 3);
    polls = 0;
    EXPECT_NO_THROW(json_schema_grammar(json::parse(R"({"type":"string"})"), 100000, poll));
    EXPECT_THROW(parse_grammar(json_schema_to_gbnf(big), 100000, poll), Stopped);   // GBNF text too
}

TEST(JsonSchema, IntegerRangesExact) {
    const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 0},     {-5, 12}, {7, 130}, {-1234, -17},
                                                             {99, 1001}, {-9, 9},  {10, 99}};
    for (const auto& [lo, hi] : ranges) {
        NumberBounds b;
        b.lo = double(lo), b.hi = double(hi);
        const Grammar g = parse_grammar("root ::= " + number_range_gbnf(b, true));
        for (int64_t v = lo - 30; v <= hi + 30; ++v)
            EXPECT_EQ(full_match(g, std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
    }
    NumberBounds open;
    open.lo = 3.5;
    const Grammar g = parse_grammar("root ::= " + number_range_gbnf(open, true));
    for (int64_t v = -20; v <= 2000; ++v) EXPECT_EQ(full_match(g, std::to_string(v)), v >= 4) << v;
}

TEST(JsonSchema, NumberRangesStayInside) {
    NumberBounds b;
    b.lo = -2.5, b.hi = 3.0, b.hi_exclusive = true;
    const Grammar g = parse_grammar("root ::= " + number_range_gbnf(b, false));
    for (const char* t : {"-2", "-1.75", "0", "2", "2.999", "-0.5", "-1.5"}) EXPECT_TRUE(full_match(g, t)) << t;
    for (const char* t : {"3", "3.0", "-3", "-2.75", "4"}) EXPECT_FALSE(full_match(g, t)) << t;
}

// Random schemas — valid, malformed and unsupported keywords mixed, nested, with $refs that
// may dangle or recurse — compile or fail with kimi::Error; a compiled one runs in the matcher
// and the token trie on random input (never another exception, never a crash: also under
// ASan + UBSan).
json random_schema(std::mt19937& rng, int depth) {
    const auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
    static const char* types[] = {"string", "integer", "number", "boolean", "null", "object", "array", "strin"};
    static const char* keys[] = {"type",
                                 "properties",
                                 "required",
                                 "additionalProperties",
                                 "enum",
                                 "const",
                                 "items",
                                 "prefixItems",
                                 "minItems",
                                 "maxItems",
                                 "anyOf",
                                 "oneOf",
                                 "allOf",
                                 "$ref",
                                 "nullable",
                                 "minLength",
                                 "maxLength",
                                 "pattern",
                                 "format",
                                 "minimum",
                                 "maximum",
                                 "exclusiveMinimum",
                                 "exclusiveMaximum",
                                 "title",
                                 "not",
                                 "uniqueItems",
                                 "$defs"};
    static const char* patterns[] = {"^[a-z]+$", "a|b", "(x", "\\d{2,3}", "[^\"]*", "(a)\\1"};
    static const char* formats[] = {"date", "uuid", "email", "ipv4", "phone"};
    static const char* refs[] = {"#", "#/$defs/a", "#/$defs/missing", "#/properties/p0", "http://x"};
    if (depth > 3 || pick(5) == 0) return pick(6) == 0 ? json(bool(pick(2))) : json{{"type", types[pick(7)]}};
    json s = json::object();
    const int n = 1 + pick(4);
    for (int i = 0; i < n; ++i) {
        const std::string k = keys[pick(int(std::size(keys)))];
        if (k == "type")
            s[k] = pick(4) == 0 ? json::array({types[pick(8)], "null"}) : json(types[pick(8)]);
        else if (k == "properties") {
            json p = json::object();
            for (int j = pick(4); j-- > 0;) p["p" + std::to_string(j)] = random_schema(rng, depth + 1);
            s[k] = p;
        } else if (k == "required")
            s[k] = pick(5) == 0 ? json("p0") : json::array({"p0"});
        else if (k == "additionalProperties" || k == "items")
            s[k] = pick(3) == 0 ? json(bool(pick(2))) : random_schema(rng, depth + 1);
        else if (k == "enum")
            s[k] = pick(6) == 0 ? json::array() : json::array({"a", 1, nullptr, json::array({2})});
        else if (k == "const")
            s[k] = json{{"k", pick(100)}};
        else if (k == "prefixItems" || k == "anyOf" || k == "oneOf" || k == "allOf") {
            json a = json::array();
            for (int j = pick(3); j-- > 0;) a.push_back(random_schema(rng, depth + 1));
            s[k] = a;
        } else if (k == "$ref")
            s[k] = refs[pick(5)];
        else if (k == "$defs")
            s[k] = json{{"a", random_schema(rng, depth + 1)}};
        else if (k == "pattern")
            s[k] = patterns[pick(6)];
        else if (k == "format")
            s[k] = formats[pick(5)];
        else if (k == "nullable" || k == "uniqueItems")
            s[k] = bool(pick(2));
        else if (k == "title")
            s[k] = "t";
        else if (k == "not")
            s[k] = json::object();
        else
            s[k] = pick(8) == 0 ? json(-1.5) : json(pick(20) - 5);
    }
    return s;
}

TEST(JsonSchema, FuzzedSchemasNeverCrash) {
    std::mt19937 rng(1234);
    std::vector<std::string> vocab;
    for (int i = 0; i < 200; ++i) {
        std::string t;
        for (int j = 1 + int(rng() % 4); j-- > 0;) t += "{}[]\":,0123456789-.aetrunlsfx \\\xc3\xa9"[rng() % 34];
        vocab.push_back(t);
    }
    const TokenTrie trie(vocab);
    int compiled = 0, refused = 0;
    std::vector<uint8_t> allowed;
    for (int i = 0; i < 600; ++i) {
        const json schema = random_schema(rng, 0);
        Grammar g;
        try {
            g = json_schema_grammar(schema, 20000);
        } catch (const Error&) {
            ++refused;
            continue;
        }
        ++compiled;
        Matcher m(g);
        for (int step = 0; step < 40 && !m.dead(); ++step) {
            trie.allowed(m, allowed);
            std::vector<int32_t> ok;
            for (size_t t = 0; t < allowed.size(); ++t)
                if (allowed[t]) ok.push_back(int32_t(t));
            if (ok.empty()) break;
            ASSERT_TRUE(m.accept(vocab[size_t(ok[rng() % ok.size()])])) << schema.dump();
        }
    }
    EXPECT_GT(compiled, 100);
    EXPECT_GT(refused, 50);
}

}   // namespace
}   // namespace kimi::grammar
