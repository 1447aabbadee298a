"""HTTP tests, part 10: structured output (constrained decoding) end to end.

Every reply is checked with an independent validator: `jsonschema` (Draft 2020-12, with a format
checker) for JSON, Python's `re.fullmatch` for regexes, and small hand-written checkers for the
GBNF grammars -- never the server's own code. A reply counts as complete when its finish_reason is
"stop" (a reply cut by max_tokens may be invalid and is only counted); every test asserts that at
least MIN_COMPLETE of its replies complete, so that no test passes vacuously, and collects all its
failures (with the reply text) before reporting them together.

  corpus       data/json_schemas.json x 3 seeds through chat response_format json_schema; a
               subset through /v1/completions with structured_outputs.json (object) and
               guided_json (JSON text); json_object; every invalid schema -> 400 naming its keyword
  regex etc.   regexes (structured_outputs.regex, guided_regex), choices, GBNF grammars; bad
               regexes / grammars / choices and two constraints at once -> 400
  sampling     stream == non-stream (chat, completions, n = 2), seeds, n > 1, logprobs of the
               masked distribution, stop strings, max_tokens cuts, sampling parameters,
               constrained and free requests running together (the free greedy reply unchanged)
  tools        tool_choice "required" / named / parallel_tool_calls false on Kimi Linear (the
               shared server) and on a Kimi-K3 server: names and arguments valid, stream ==
               non-stream; "auto" unchanged; an unknown name -> 400; K3 response_format json_schema
               (thinking on and off)
Run through http_test.py (`-k Structured`).
"""
import concurrent.futures
import datetime
import json
import math
import os
import re
import threading
import time
import unittest

import jsonschema

import http_common as hc
from http_common import chat_body, check_error, completion_body, post, stream

setUpModule = hc.setup_shared      # the model and the shared server: once, for all the modules

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "json_schemas.json")
with open(DATA, encoding="utf-8") as _f:
    CORPUS = json.load(_f)
VALID = CORPUS["valid"]
INVALID = CORPUS["invalid"]
BY_NAME = {e["name"]: e for e in VALID}

SEEDS = (11, 22, 33)
MAX_TOKENS = 1500
MIN_COMPLETE = 0.8        # share of replies that must finish with "stop" in each test
WORKERS = 6               # requests in flight at once (the server batches them)
CHAT = "/v1/chat/completions"
COMPL = "/v1/completions"
PROMPT = [{"role": "user", "content": "Reply with JSON."}]

# the subset sent through /v1/completions (each kind of keyword once)
COMPLETION_SUBSET = ["type_integer", "type_list_string_null", "required_some", "additional_schema", "enum_mixed",
                     "const_object", "prefix_items_false", "min_max_items", "oneOf_tagged", "allOf_objects",
                     "ref_recursive_list", "nullable_in_object", "pattern_code", "formats_in_object",
                     "number_wide_range", "escaped_property_names", "unicode_names_and_enum", "nested_3_levels"]


# ----------------------------------------------------------------------------------------------
# The independent validator
# ----------------------------------------------------------------------------------------------

_RFC3339_TIME = r"([01]\d|2[0-3]):([0-5]\d):([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)"
_RFC3339_DATE = r"(\d{4})-(\d{2})-(\d{2})"


def _is_rfc3339_date(s):
    m = re.fullmatch(_RFC3339_DATE, s)
    if not m:
        return False
    try:
        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return True


def _format_checker():
    """jsonschema's FormatChecker. Without the optional rfc3339-validator it checks `time` with
    the draft-3 rule (HH:MM:SS, no offset) and `date-time` not at all: RFC 3339 (JSON Schema's
    definition) is checked here instead."""
    fc = jsonschema.FormatChecker()
    try:
        import rfc3339_validator  # noqa: F401
    except ImportError:
        @fc.checks("time")
        def _time(s):
            return not isinstance(s, str) or re.fullmatch(_RFC3339_TIME, s) is not None

        @fc.checks("date-time")
        def _date_time(s):
            if not isinstance(s, str):
                return True
            m = re.fullmatch(_RFC3339_DATE + "[Tt]" + _RFC3339_TIME, s)
            return m is not None and _is_rfc3339_date(s[:10])
    return fc


FORMATS = _format_checker()


def validator_schema(s):
    """The schema for jsonschema: OpenAPI's `nullable: true` (which jsonschema ignores) becomes
    `anyOf [schema, {type: null}]`; everything else as given."""
    if isinstance(s, list):
        return [validator_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {k: (x if k in ("const", "enum", "default", "examples") else validator_schema(x)) for k, x in s.items()}
    if s.get("nullable") is True:
        out.pop("nullable")
        keep = {k: out.pop(k) for k in ("$defs", "definitions", "$schema", "$id") if k in out}
        out = dict(keep, anyOf=[out, {"type": "null"}])
    return out


_VALIDATORS = {}


def schema_errors(schema, value):
    """The validation errors of value under schema (empty: valid)."""
    key = json.dumps(schema, sort_keys=True)
    v = _VALIDATORS.get(key)
    if v is None:
        v = _VALIDATORS[key] = jsonschema.Draft202012Validator(validator_schema(schema), format_checker=FORMATS)
    return ["%s at %s" % (e.message, "/".join(map(str, e.absolute_path))) for e in v.iter_errors(value)]


def json_errors(schema, text):
    """Why text is not one JSON value valid under schema ([] when it is)."""
    if not isinstance(text, str):
        return ["no text: %r" % (text,)]
    try:
        value = json.loads(text)
    except ValueError as e:
        return ["not JSON: %s" % e]
    return schema_errors(schema, value)


# ----------------------------------------------------------------------------------------------
# Running requests and collecting results
# ----------------------------------------------------------------------------------------------

def run_all(port, jobs, workers=WORKERS):
    """jobs: [(key, path, body)] -> {key: Resp}, sent WORKERS at a time."""
    out = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        futs = {ex.submit(post, port, path, body, timeout=300.0): key for key, path, body in jobs}
        for f in concurrent.futures.as_completed(futs):
            out[futs[f]] = f.result()
    return out


def reply(choice, chat):
    return choice["message"]["content"] if chat else choice["text"]


class Tally:
    """Replies of one test: how many completed, and every failure (reported together)."""

    def __init__(self, what):
        self.what = what
        self.total = 0
        self.complete = 0
        self.failures = []
        self.incomplete = []
        self.invalid = 0

    def fail(self, key, why, text=None):
        self.failures.append("%s: %s%s" % (key, why, "" if text is None else "\n      reply: %r" % (text,)))

    def choice(self, key, choice, errors_of):
        """One choice: counted; when complete, errors_of(choice) must be []."""
        self.total += 1
        fr = choice.get("finish_reason")
        if fr == "length":
            self.incomplete.append(key)
            return False
        if fr not in ("stop", "tool_calls"):
            self.fail(key, "finish_reason %r" % (fr,), choice)
            return False
        self.complete += 1
        errs = errors_of(choice)
        if errs:
            self.invalid += 1
            self.fail(key, "; ".join(errs[:3]), choice.get("message", choice.get("text")))
            return False
        return True

    def response(self, key, r, errors_of, n=1):
        if r.status != 200:
            self.total += n
            self.fail(key, "HTTP %d %s" % (r.status, r.body[:600].decode("utf-8", "replace")))
            return
        j = r.json()
        if len(j.get("choices", [])) != n:
            self.total += n
            self.fail(key, "%d choices, want %d" % (len(j.get("choices", [])), n))
            return
        for c in j["choices"]:
            self.choice("%s#%d" % (key, c.get("index", -1)), c, errors_of)

    def check(self, tc, min_complete=MIN_COMPLETE):
        rate = self.complete / self.total if self.total else 0.0
        valid = (self.complete - self.invalid) / self.complete if self.complete else 0.0
        summary = "%s: %d replies, %d complete (%.0f%%), %.1f%% of the complete ones valid, %d failures" % (
            self.what, self.total, self.complete, 100 * rate, 100 * valid, len(self.failures))
        msg = summary
        if self.failures:
            msg += "\n  " + "\n  ".join(self.failures)
        if self.incomplete:
            msg += "\n  cut by max_tokens: " + ", ".join(self.incomplete)
        if self.failures:
            tc.fail(msg)
        tc.assertGreaterEqual(rate, min_complete, msg)
        return summary


def schema_body(schema, chat=True, **kw):
    if chat:
        b = chat_body(messages=PROMPT, max_tokens=MAX_TOKENS, temperature=1.0,
                      response_format={"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}})
    else:
        b = completion_body(prompt="JSON:", max_tokens=MAX_TOKENS, temperature=1.0, structured_outputs={"json": schema})
    b.update(kw)
    return b


def error_message(tc, r, what):
    e = check_error(tc, r, 400, msg=what)
    return e["message"]


# ----------------------------------------------------------------------------------------------
# GBNF grammars and their independent checkers
# ----------------------------------------------------------------------------------------------

ARITH_GBNF = r'''
# arithmetic: integers, + - * /, parentheses
root   ::= expr
expr   ::= term (("+" | "-") term){0,3}
term   ::= factor (("*" | "/") factor){0,2}
factor ::= [0-9]{1,3} | "(" expr ")"
'''


def arith_ok(s):
    """Recursive-descent check of ARITH_GBNF (the repetition bounds included)."""
    pos = 0

    def number():
        nonlocal pos
        m = re.match(r"[0-9]{1,3}", s[pos:])
        if not m:
            return False
        pos += m.end()
        return True

    def factor():
        nonlocal pos
        if pos < len(s) and s[pos] == "(":
            pos += 1
            if not expr() or pos >= len(s) or s[pos] != ")":
                return False
            pos += 1
            return True
        return number()

    def seq(item, ops, most):
        nonlocal pos
        if not item():
            return False
        n = 0
        while pos < len(s) and s[pos] in ops and n < most:
            pos += 1
            if not item():
                return False
            n += 1
        return True

    def term():
        return seq(factor, "*/", 2)

    def expr():
        return seq(term, "+-", 3)

    return expr() and pos == len(s)


LIST_GBNF = r'''
root  ::= "[" ( item ( "," " "? item ){0,4} )? "]"
item  ::= word | quoted | num | "true" | "false" | "null"
word  ::= [a-z] [a-z_]{0,5}
quoted ::= "\"" [^"\\\n]{0,6} "\""
num   ::= "-"? [0-9]{1,4}
'''
_LIST_ITEM = r'(?:[a-z][a-z_]{0,5}|"[^"\\\n]{0,6}"|-?[0-9]{1,4}|true|false|null)'
LIST_RE = r"\[(?:%s(?:, ?%s){0,4})?\]" % (_LIST_ITEM, _LIST_ITEM)

KV_GBNF = r'''
root  ::= line{1,3}
line  ::= key "=" value "\n"
key   ::= [a-z]{1,6}
value ::= "true" | "false" | [0-9]{1,4} | "'" [A-Za-z ]{0,8} "'"
'''
KV_RE = r"(?:[a-z]{1,6}=(?:true|false|[0-9]{1,4}|'[A-Za-z ]{0,8}')\n){1,3}"

TAG_GBNF = r'''
root ::= "<" tag ">" body "</" tag ">"   # tags need not match: the checker allows that too
tag  ::= "b" | "i" | "em"
body ::= ( [^<>&] | "&amp;" | "&lt;" ){0,8}
'''
TAG_RE = r"<(?:b|i|em)>(?:[^<>&]|&amp;|&lt;){0,8}</(?:b|i|em)>"

UNICODE_GBNF = r'''
root ::= greet " " name "!"?
greet ::= "héllo" | "你好" | "Γειά" | "\u00e7a va"
name ::= [α-ω]{1,4} | [a-z]{1,4}
'''
UNICODE_RE = r"(?:héllo|你好|Γειά|ça va) (?:[α-ω]{1,4}|[a-z]{1,4})!?"

GRAMMARS = [
    ("arithmetic", ARITH_GBNF, arith_ok),
    ("list", LIST_GBNF, lambda s: re.fullmatch(LIST_RE, s) is not None),
    ("key_value_lines", KV_GBNF, lambda s: re.fullmatch(KV_RE, s) is not None),
    ("tags", TAG_GBNF, lambda s: re.fullmatch(TAG_RE, s) is not None),
    ("unicode", UNICODE_GBNF, lambda s: re.fullmatch(UNICODE_RE, s) is not None),
]

REGEXES = [
    ("phone", r"\d{3}-\d{4}"),
    ("date", r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"),
    ("alternation", r"(red|green|blue)( (red|green|blue)){0,2}"),
    ("classes", r"[A-Z][a-z]{2,6}[0-9]?"),
    ("negated_class", r"[^\n\"]{1,10}"),
    ("email_like", r"[a-z]{1,8}@[a-z]{1,8}\.(com|org|net)"),
    ("unicode", r"(日本|Ελλάδα|ça)[αβγé]{1,4}"),
    ("anchored_optional", r"^(ab)+?c?x{0,3}$"),
    ("escapes", r"\(\d{1,2}\) \[[a-f0-9]{2}\]\.\*"),
    ("hex_word", r"0x[0-9A-F]{1,8}|\w{1,6}"),
]

CHOICES = [
    ("yes_no", ["yes", "no", "maybe"]),
    ("prefixes", ["a", "ab", "abc", "b"]),
    ("unicode", ["日本", "Ελλάδα", "🙂 smile", "ça"]),
    ("quotes_spaces", ["say \"hi\"", "x y z", "back\\slash", "new\nline"]),
]


# ----------------------------------------------------------------------------------------------
# 10a. The JSON Schema corpus
# ----------------------------------------------------------------------------------------------

class T10StructuredCorpus(unittest.TestCase):
    def test_a_corpus_offline(self):
        """The corpus itself: >= 60 valid schemas, each a valid Draft 2020-12 schema with an
        example it accepts; invalid ones name their keyword; names unique."""
        self.assertGreaterEqual(len(VALID), 60)
        self.assertGreaterEqual(len(INVALID), 12)
        names = [e["name"] for e in VALID + INVALID]
        self.assertEqual(len(names), len(set(names)), "duplicate names")
        bad = []
        for e in VALID:
            try:
                jsonschema.Draft202012Validator.check_schema(e["schema"])
            except jsonschema.SchemaError as ex:
                bad.append("%s: not a schema: %s" % (e["name"], ex.message))
                continue
            errs = schema_errors(e["schema"], e["example"])
            if errs:
                bad.append("%s: example invalid: %s" % (e["name"], errs))
        for e in INVALID:
            if not isinstance(e.get("keyword"), str) or not e["keyword"]:
                bad.append("%s: no keyword" % e["name"])
        for name in COMPLETION_SUBSET:
            if name not in BY_NAME:
                bad.append("completion subset names %s, not in the corpus" % name)
        self.assertFalse(bad, "\n".join(bad))

    def test_a2_validator_selftest(self):
        """The validator refuses what it should (so a valid verdict means something)."""
        refused = [
            ({"type": "string", "maxLength": 3}, "abcd"),
            ({"type": "integer"}, 1.5),
            ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, {}),
            ({"type": "object", "properties": {}, "additionalProperties": False}, {"x": 1}),
            ({"type": "string", "nullable": True}, 5),
            ({"type": "string", "format": "date"}, "2023-02-30"),
            ({"type": "string", "format": "date-time"}, "2024-01-01 10:00"),
            ({"type": "string", "format": "date-time"}, "2023-02-29T10:00:00Z"),
            ({"type": "string", "format": "time"}, "25:00:00Z"),
            ({"type": "string", "format": "uuid"}, "123e4567-e89b-12d3-a456"),
            ({"type": "string", "format": "ipv4"}, "256.1.1.1"),
            ({"type": "string", "pattern": "^[a-z]{2,5}$"}, "abcdef"),
            ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 3),
            ({"type": "integer", "exclusiveMaximum": 10}, 10),
            (BY_NAME["ref_recursive_tree"]["schema"], {"v": 1, "kids": [{"v": 10}]}),
            (BY_NAME["realistic_order"]["schema"], dict(BY_NAME["realistic_order"]["example"], currency="USD")),
        ]
        for schema, value in refused:
            self.assertTrue(schema_errors(schema, value), (schema, value))
        self.assertEqual(schema_errors({"type": "string", "nullable": True}, None), [])
        self.assertEqual(schema_errors({"type": "string", "format": "time"}, "23:59:60.5+05:30"), [])
        self.assertTrue(json_errors({}, '{"a": 1} x'))
        self.assertTrue(json_errors({}, ""))

    def test_b_chat_response_format_corpus(self):
        """Every valid schema x 3 seeds through chat response_format json_schema (temperature 1)."""
        jobs = [((e["name"], seed), CHAT, schema_body(e["schema"], seed=seed)) for e in VALID for seed in SEEDS]
        t0 = time.monotonic()
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("chat response_format json_schema, %d schemas x %d seeds" % (len(VALID), len(SEEDS)))
        for (name, seed), _, _ in jobs:
            schema = BY_NAME[name]["schema"]
            t.response("%s seed %d" % (name, seed), res[(name, seed)],
                       lambda c, s=schema: json_errors(s, c["message"]["content"]))
        summary = t.check(self)
        print("\n    %s (%.1f s)" % (summary, time.monotonic() - t0), end=" ", flush=True)

    def test_c_completions_structured_outputs_json(self):
        """A subset through /v1/completions: structured_outputs.json (a schema object)."""
        jobs = [((name, seed), COMPL, schema_body(BY_NAME[name]["schema"], chat=False, seed=seed))
                for name in COMPLETION_SUBSET for seed in SEEDS[:2]]
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("completions structured_outputs.json")
        for key, _, _ in jobs:
            schema = BY_NAME[key[0]]["schema"]
            t.response("%s seed %d" % key, res[key], lambda c, s=schema: json_errors(s, c["text"]))
        t.check(self)

    def test_d_completions_guided_json_text(self):
        """The same subset with guided_json given as JSON text (vLLM takes both)."""
        jobs = [(name, COMPL, completion_body(prompt="Data:", max_tokens=MAX_TOKENS, temperature=1.0, seed=5,
                                              guided_json=json.dumps(BY_NAME[name]["schema"], ensure_ascii=False)))
                for name in COMPLETION_SUBSET]
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("completions guided_json (text)")
        for name, _, _ in jobs:
            t.response(name, res[name], lambda c, s=BY_NAME[name]["schema"]: json_errors(s, c["text"]))
        t.check(self)

    def test_e_guided_json_chat_and_structured_outputs_chat(self):
        """guided_json (object) and structured_outputs.json (object and JSON text) on chat too."""
        names = ["required_all", "oneOf_tagged", "ref_defs", "tool_like_weather"]
        jobs = []
        for name in names:
            s = BY_NAME[name]["schema"]
            jobs.append(((name, "guided_json"), CHAT, chat_body(messages=PROMPT, max_tokens=MAX_TOKENS, seed=3,
                                                                 temperature=1.0, guided_json=s)))
            jobs.append(((name, "structured_outputs"), CHAT, chat_body(messages=PROMPT, max_tokens=MAX_TOKENS, seed=3,
                                                                        temperature=1.0,
                                                                        structured_outputs={"json": s})))
            jobs.append(((name, "structured_outputs text"), CHAT,
                         chat_body(messages=PROMPT, max_tokens=MAX_TOKENS, seed=3, temperature=1.0,
                                   structured_outputs={"json": json.dumps(s)})))
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("chat guided_json / structured_outputs.json")
        for key, _, _ in jobs:
            t.response("%s %s" % key, res[key], lambda c, s=BY_NAME[key[0]]["schema"]: json_errors(s, c["message"]["content"]))
        t.check(self)

    def test_f_json_object(self):
        """response_format json_object (chat and completions) and structured_outputs.json_object:
        one JSON object."""
        def obj_errors(text):
            try:
                v = json.loads(text)
            except (ValueError, TypeError) as e:
                return ["not JSON: %s" % e]
            return [] if isinstance(v, dict) else ["not an object: %r" % type(v).__name__]

        jobs = []
        for seed in SEEDS + (44, 55):
            jobs.append((("chat", seed), CHAT, chat_body(messages=PROMPT, max_tokens=MAX_TOKENS, temperature=1.0,
                                                         seed=seed, response_format={"type": "json_object"})))
            jobs.append((("completions", seed), COMPL, completion_body(max_tokens=MAX_TOKENS, temperature=1.0, seed=seed,
                                                                       response_format={"type": "json_object"})))
        jobs.append((("structured_outputs", 1), COMPL, completion_body(max_tokens=MAX_TOKENS, temperature=1.0, seed=1,
                                                                       structured_outputs={"json_object": True})))
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("json_object")
        for key, _, _ in jobs:
            chat = key[0] == "chat"
            t.response("%s seed %d" % key, res[key], lambda c, chat=chat: obj_errors(reply(c, chat)))
        t.check(self)

    def test_g_response_format_text_is_free(self):
        b = chat_body(max_tokens=16, temperature=0, ignore_eos=True)
        free = post(hc.MAIN.port, CHAT, b)
        txt = post(hc.MAIN.port, CHAT, dict(b, response_format={"type": "text"}))
        self.assertEqual(free.status, 200, free)
        self.assertEqual(txt.status, 200, txt)
        self.assertEqual(txt.json()["choices"][0]["message"]["content"], free.json()["choices"][0]["message"]["content"])

    def test_h_invalid_schemas(self):
        """Every invalid schema -> 400 whose message names the keyword, through response_format
        (chat), structured_outputs.json and guided_json (completions)."""
        failures = []
        for e in INVALID:
            for path, body in (
                    (CHAT, chat_body(response_format={"type": "json_schema",
                                                      "json_schema": {"name": "x", "schema": e["schema"]}})),
                    (COMPL, completion_body(structured_outputs={"json": e["schema"]})),
                    (COMPL, completion_body(guided_json=e["schema"]))):
                field = [k for k in ("response_format", "structured_outputs", "guided_json") if k in body][0]
                r = post(hc.MAIN.port, path, body)
                if r.status != 400:
                    failures.append("%s via %s: HTTP %d %r" % (e["name"], field, r.status, r.body[:300]))
                    continue
                try:
                    msg = error_message(self, r, e["name"])
                except AssertionError as ex:
                    failures.append("%s via %s: bad error JSON: %s" % (e["name"], field, ex))
                    continue
                if e["keyword"] not in msg:
                    failures.append("%s via %s: message does not name %r: %r" % (e["name"], field, e["keyword"], msg))
        r = post(hc.MAIN.port, CHAT, chat_body())
        self.assertEqual(r.status, 200, "the server still serves: %r" % r)
        if failures:
            self.fail("\n".join(failures))

    def test_i_malformed_constraint_fields(self):
        """Ill-typed constraint fields -> 400 (not 5xx)."""
        cases = [
            ("response_format no schema", CHAT, chat_body(response_format={"type": "json_schema", "json_schema": {"name": "x"}})),
            ("response_format bad type", CHAT, chat_body(response_format={"type": "xml"})),
            ("guided_json bad text", COMPL, completion_body(guided_json="{not json")),
            ("guided_json number", COMPL, completion_body(guided_json=5)),
            ("structured_outputs not object", COMPL, completion_body(structured_outputs="json")),
            ("structured_outputs empty regex type", COMPL, completion_body(structured_outputs={"regex": 5})),
            ("structured_outputs unknown key", COMPL, completion_body(structured_outputs={"xml": "a"})),
            ("structured_outputs two keys", COMPL, completion_body(structured_outputs={"regex": "a", "choice": ["a"]})),
            ("guided_choice not list", CHAT, chat_body(guided_choice="a")),
            ("guided_choice ints", CHAT, chat_body(guided_choice=[1, 2])),
        ]
        failures = []
        for name, path, body in cases:
            r = post(hc.MAIN.port, path, body)
            if r.status != 400:
                failures.append("%s: HTTP %d %r" % (name, r.status, r.body[:300]))
                continue
            try:
                check_error(self, r, 400, msg=name)
            except AssertionError as ex:
                failures.append("%s: %s" % (name, ex))
        if failures:
            self.fail("\n".join(failures))


# ----------------------------------------------------------------------------------------------
# 10b. Regexes, choices, grammars
# ----------------------------------------------------------------------------------------------

class T10StructuredRegexChoiceGrammar(unittest.TestCase):
    def test_a_regex(self):
        jobs = []
        for name, rx in REGEXES:
            for seed in SEEDS[:2]:
                jobs.append(((name, "structured_outputs", seed), COMPL,
                             completion_body(max_tokens=200, temperature=1.0, seed=seed,
                                             structured_outputs={"regex": rx})))
            jobs.append(((name, "guided_regex", 7), CHAT, chat_body(max_tokens=200, temperature=1.0, seed=7,
                                                                     guided_regex=rx)))
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("regex")
        for key, path, _ in jobs:
            rx = dict(REGEXES)[key[0]]
            chat = path == CHAT
            t.response("%s via %s seed %d" % key, res[key],
                       lambda c, rx=rx, chat=chat: [] if re.fullmatch(rx, reply(c, chat) or "") else
                       ["does not fullmatch %r" % rx])
        t.check(self)

    def test_b_choice(self):
        jobs = []
        for name, ch in CHOICES:
            for seed in SEEDS:
                jobs.append(((name, "structured_outputs", seed), COMPL,
                             completion_body(max_tokens=50, temperature=1.0, seed=seed, structured_outputs={"choice": ch})))
                jobs.append(((name, "guided_choice", seed), CHAT,
                             chat_body(max_tokens=50, temperature=1.0, seed=seed, guided_choice=ch)))
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("choice")
        seen = {}
        for key, path, _ in jobs:
            ch = dict(CHOICES)[key[0]]
            chat = path == CHAT
            t.response("%s via %s seed %d" % key, res[key],
                       lambda c, ch=ch, chat=chat: [] if reply(c, chat) in ch else ["not one of %r" % ch])
            if res[key].status == 200:
                seen.setdefault(key[0], set()).add(reply(res[key].json()["choices"][0], chat))
        t.check(self)
        # greedy picks one and keeps it
        r1 = post(hc.MAIN.port, COMPL, completion_body(max_tokens=50, temperature=0, guided_choice=["left", "right"]))
        r2 = post(hc.MAIN.port, COMPL, completion_body(max_tokens=50, temperature=0, guided_choice=["left", "right"]))
        self.assertEqual(r1.status, 200, r1)
        self.assertIn(r1.json()["choices"][0]["text"], ["left", "right"])
        self.assertEqual(r1.json()["choices"][0]["text"], r2.json()["choices"][0]["text"])

    def test_c_grammar(self):
        jobs = []
        for name, g, _ in GRAMMARS:
            for seed in SEEDS:
                jobs.append(((name, "structured_outputs", seed), COMPL,
                             completion_body(max_tokens=400, temperature=1.0, seed=seed,
                                             structured_outputs={"grammar": g})))
            jobs.append(((name, "guided_grammar", 9), CHAT, chat_body(max_tokens=400, temperature=1.0, seed=9,
                                                                       guided_grammar=g)))
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("grammar")
        checkers = {n: ok for n, _, ok in GRAMMARS}
        for key, path, _ in jobs:
            chat = path == CHAT
            t.response("%s via %s seed %d" % key, res[key],
                       lambda c, ok=checkers[key[0]], chat=chat: [] if ok(reply(c, chat) or "") else
                       ["not a sentence of the grammar"])
        t.check(self)

    def test_d_checkers_selftest(self):
        """The hand-written checkers accept and refuse what they should."""
        self.assertTrue(arith_ok("1+(2*30)/4"))
        self.assertTrue(arith_ok("((7))"))
        self.assertFalse(arith_ok("1+"))
        self.assertFalse(arith_ok("1234"))
        self.assertFalse(arith_ok("1+2+3+4+5"))
        self.assertTrue(re.fullmatch(LIST_RE, '[ab, "x y",-12,true]'))
        self.assertTrue(re.fullmatch(LIST_RE, "[]"))
        self.assertFalse(re.fullmatch(LIST_RE, "[a,b,c,d,e,f]"))
        self.assertTrue(re.fullmatch(KV_RE, "a=1\nbc='Hi x'\n"))
        self.assertTrue(re.fullmatch(TAG_RE, "<em>a&amp;b</i>"))
        self.assertTrue(re.fullmatch(UNICODE_RE, "你好 αβ!"))

    def test_e_invalid(self):
        """Bad regexes, grammars and choices, and two constraints at once -> 400 naming them."""
        cases = [
            ("regex open group", completion_body(structured_outputs={"regex": "(a"}), "regex"),
            ("regex backreference", completion_body(structured_outputs={"regex": "(a)\\1"}), "regex"),
            ("regex lookahead", completion_body(structured_outputs={"regex": "a(?=b)"}), "regex"),
            ("guided_regex bad class", completion_body(guided_regex="[z-a]"), "regex"),
            ("grammar undefined rule", completion_body(structured_outputs={"grammar": "root ::= foo"}), "grammar"),
            ("grammar unterminated", completion_body(structured_outputs={"grammar": 'root ::= "a'}), "grammar"),
            ("grammar no root", completion_body(structured_outputs={"grammar": 'expr ::= "a"'}), "grammar"),
            ("grammar left recursion", completion_body(structured_outputs={"grammar": 'root ::= root "a" | "b"'}),
             "grammar"),
            ("grammar garbage", completion_body(guided_grammar="::= ::="), "grammar"),
            ("choice empty", completion_body(structured_outputs={"choice": []}), "choice"),
            ("guided_choice empty", chat_body(guided_choice=[]), "choice"),
            ("two constraints guided", completion_body(guided_regex="a+", guided_choice=["a"]), None),
            ("two constraints mixed", chat_body(response_format={"type": "json_object"}, guided_regex="a+"), None),
            ("two constraints so+guided", completion_body(structured_outputs={"choice": ["a"]},
                                                          guided_json={"type": "integer"}), None),
        ]
        failures = []
        for name, body, kw in cases:
            r = post(hc.MAIN.port, CHAT if "messages" in body else COMPL, body)
            if r.status != 400:
                failures.append("%s: HTTP %d %r" % (name, r.status, r.body[:300]))
                continue
            try:
                msg = error_message(self, r, name)
            except AssertionError as ex:
                failures.append("%s: %s" % (name, ex))
                continue
            if kw is not None and kw not in msg:
                failures.append("%s: message does not name %r: %r" % (name, kw, msg))
        if failures:
            self.fail("\n".join(failures))


# ----------------------------------------------------------------------------------------------
# 10c. Sampling features under a constraint
# ----------------------------------------------------------------------------------------------

def stream_choices(s, chat):
    """{index: (text, finish_reason)} of a stream."""
    parts, finish = {}, {}
    for ev in s.events:
        for ch in ev["choices"]:
            i = ch["index"]
            if chat:
                c = ch["delta"].get("content")
                if c is not None:
                    parts.setdefault(i, []).append(c)
            else:
                parts.setdefault(i, []).append(ch["text"])
            if ch.get("finish_reason") is not None:
                finish[i] = ch["finish_reason"]
    return {i: ("".join(parts.get(i, [])), finish.get(i)) for i in set(parts) | set(finish)}


class T10StructuredSampling(unittest.TestCase):
    def _stream_equals_plain(self, path, body, chat, n=1):
        plain = post(hc.MAIN.port, path, body)
        self.assertEqual(plain.status, 200, plain)
        pj = plain.json()
        want = {c["index"]: (reply(c, chat), c["finish_reason"]) for c in pj["choices"]}
        self.assertEqual(sorted(want), list(range(n)))
        s = stream(hc.MAIN.port, path, dict(body, stream=True))
        self.assertEqual(s.status, 200, s.raw_error)
        self.assertTrue(s.done)
        got = stream_choices(s, chat)
        self.assertEqual(got, want, "stream != non-stream for the same seed")
        again = post(hc.MAIN.port, path, body).json()
        self.assertEqual({c["index"]: (reply(c, chat), c["finish_reason"]) for c in again["choices"]}, want,
                         "the same seed, another reply")
        return want

    def test_a_stream_equals_non_stream(self):
        cases = [("realistic_order", 1), ("ref_recursive_tree", 1), ("unicode_names_and_enum", 2),
                 ("escaped_property_names", 2)]
        for name, n in cases:
            schema = BY_NAME[name]["schema"]
            for chat in (True, False):
                with self.subTest(schema=name, chat=chat, n=n):
                    body = schema_body(schema, chat=chat, seed=77, n=n)
                    want = self._stream_equals_plain(CHAT if chat else COMPL, body, chat, n)
                    for i, (text, fr) in want.items():
                        if fr == "stop":
                            self.assertEqual(json_errors(schema, text), [], text)
        # a regex and a grammar too
        self._stream_equals_plain(COMPL, completion_body(max_tokens=200, temperature=1.0, seed=5,
                                                         guided_regex=REGEXES[1][1]), False)
        self._stream_equals_plain(CHAT, chat_body(max_tokens=400, temperature=1.0, seed=5, n=2,
                                                  guided_grammar=ARITH_GBNF), True, 2)

    def test_b_n_choices_each_valid(self):
        names = ["realistic_person", "oneOf_tagged", "prefix_items_then_items", "anyOf_objects"]
        jobs = [(name, CHAT, schema_body(BY_NAME[name]["schema"], seed=8, n=3)) for name in names]
        jobs += [(name + " completions", COMPL, schema_body(BY_NAME[name]["schema"], chat=False, seed=8, n=3))
                 for name in names]
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("n = 3")
        for key, path, _ in jobs:
            chat = path == CHAT
            schema = BY_NAME[key.split(" ")[0]]["schema"]
            t.response(key, res[key], lambda c, s=schema, chat=chat: json_errors(s, reply(c, chat)), n=3)
        t.check(self)
        # the three choices are drawn independently: not all equal for a schema with many replies
        texts = [c["message"]["content"] for c in res["realistic_person"].json()["choices"]]
        self.assertGreater(len(set(texts)), 1, texts)

    def test_c_logprobs(self):
        """logprobs are those of the masked distribution: numbers <= 0, top_logprobs sorted, their
        probabilities sum to <= 1; greedy picks the first of top_logprobs. A masked-out token has
        probability 0: it is either left out of top_logprobs or given a number (vLLM writes
        -9999.0), never null."""
        def num(x):
            return isinstance(x, (int, float)) and not isinstance(x, bool)

        schema = BY_NAME["realistic_person"]["schema"]
        failures = []
        for temp in (1.0, 0.0):
            r = post(hc.MAIN.port, CHAT, schema_body(schema, seed=4, temperature=temp, logprobs=True, top_logprobs=3))
            self.assertEqual(r.status, 200, r)
            j = r.json()
            ch = j["choices"][0]
            content = ch["logprobs"]["content"]
            self.assertEqual(len(content), j["usage"]["completion_tokens"])
            for k, e in enumerate(content):
                tops = e["top_logprobs"]
                where = "chat temp %g token %d %s" % (temp, k, json.dumps(e, ensure_ascii=False))
                if not (num(e["logprob"]) and e["logprob"] <= 1e-6):
                    failures.append("chosen logprob not a number <= 0: " + where)
                if not 1 <= len(tops) <= 3:
                    failures.append("%d top_logprobs: %s" % (len(tops), where))
                if not all(num(x["logprob"]) for x in tops):
                    failures.append("top_logprobs entry whose logprob is not a number: " + where)
                    continue
                lps = [x["logprob"] for x in tops]
                if lps != sorted(lps, reverse=True):
                    failures.append("top_logprobs not sorted: " + where)
                if any(lp > 1e-6 for lp in lps) or sum(math.exp(lp) for lp in lps) > 1.0 + 1e-3:
                    failures.append("top_logprobs not a distribution: " + where)
                if temp == 0.0 and tops and tops[0]["token"] != e["token"] and abs(tops[0]["logprob"] - e["logprob"]) > 1e-6:
                    failures.append("greedy token is not the most likely allowed one: " + where)
            if ch["finish_reason"] == "stop":
                errs = json_errors(schema, ch["message"]["content"])
                if errs:
                    failures.append("temp %g: invalid %s: %r" % (temp, errs, ch["message"]["content"]))
        r = post(hc.MAIN.port, COMPL, schema_body(BY_NAME["required_all"]["schema"], chat=False, seed=4, logprobs=2))
        self.assertEqual(r.status, 200, r)
        j = r.json()
        lp = j["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), j["usage"]["completion_tokens"])
        self.assertEqual(len(lp["token_logprobs"]), len(lp["tokens"]))
        for k, x in enumerate(lp["token_logprobs"]):
            where = "completions token %d %r: top %r" % (k, lp["tokens"][k], lp["top_logprobs"][k])
            if not (num(x) and x <= 1e-6):
                failures.append("chosen logprob %r not a number <= 0: %s" % (x, where))
            vals = list(lp["top_logprobs"][k].values())
            if not 1 <= len(vals) <= 2 or not all(num(v) and v <= 1e-6 for v in vals):
                failures.append("top_logprobs not 1-2 numbers <= 0: " + where)
        if failures:
            self.fail("%d problems:\n%s" % (len(failures), "\n".join(failures[:12])))

    def test_c2_greedy_same_with_and_without_mask_path(self):
        """Greedy replies are the same whether the sampler may try the unmasked token first (no
        logprobs) or must compute the mask (logprobs, top_k): the most likely allowed token."""
        names = ["realistic_order", "escaped_property_names", "ref_recursive_tree", "format_date_time",
                 "unicode_names_and_enum", "number_wide_range"]
        variants = [dict(), dict(logprobs=True, top_logprobs=1), dict(top_k=1, temperature=1.0), dict(top_p=0.01, temperature=1.0)]
        jobs = [((name, k), CHAT, schema_body(BY_NAME[name]["schema"], **dict(dict(temperature=0), **v)))
                for name in names for k, v in enumerate(variants)]
        res = run_all(hc.MAIN.port, jobs)
        failures = []
        for name in names:
            texts = []
            for k in range(len(variants)):
                r = res[(name, k)]
                self.assertEqual(r.status, 200, r)
                texts.append(r.json()["choices"][0]["message"]["content"])
            if len(set(texts)) != 1:
                failures.append("%s: %s" % (name, " | ".join("%r: %r" % (variants[k], t) for k, t in enumerate(texts))))
        if failures:
            self.fail("\n".join(failures))

    def test_d_stop_string(self):
        """A stop string still ends a constrained reply (just before it)."""
        b = schema_body(BY_NAME["tool_like_weather"]["schema"], temperature=0)
        full = post(hc.MAIN.port, CHAT, b).json()["choices"][0]["message"]["content"]
        self.assertEqual(json_errors(BY_NAME["tool_like_weather"]["schema"], full), [], full)
        cut = full.index('"unit"')
        r = post(hc.MAIN.port, CHAT, dict(b, stop=['"unit"']))
        self.assertEqual(r.status, 200, r)
        ch = r.json()["choices"][0]
        self.assertEqual(ch["finish_reason"], "stop", ch)
        self.assertEqual(ch["message"]["content"], full[:cut], (full, ch))
        # streamed too
        s = stream(hc.MAIN.port, CHAT, dict(b, stop=['"unit"'], stream=True))
        self.assertEqual(stream_choices(s, True), {0: (full[:cut], "stop")})

    def test_e_max_tokens_cut(self):
        for path, chat in ((CHAT, True), (COMPL, False)):
            body = schema_body(BY_NAME["realistic_order"]["schema"], chat=chat, seed=1)
            body["max_tokens"] = 3
            r = post(hc.MAIN.port, path, body)
            self.assertEqual(r.status, 200, r)
            j = r.json()
            self.assertEqual(j["choices"][0]["finish_reason"], "length", j)
            self.assertEqual(j["usage"]["completion_tokens"], 3, j)
            self.assertTrue(reply(j["choices"][0], chat).startswith("{"), j)

    def test_f_sampling_parameters(self):
        """temperature / top_p / top_k / min_p / penalties / logit_bias act on the allowed tokens:
        every complete reply still valid."""
        params = [dict(temperature=0.0), dict(temperature=0.7, top_p=0.9), dict(temperature=1.5, top_k=5),
                  dict(temperature=1.0, min_p=0.2), dict(temperature=1.0, top_p=0.5, top_k=3),
                  dict(temperature=1.0, presence_penalty=1.5, frequency_penalty=1.0),
                  dict(temperature=1.0, repetition_penalty=1.3), dict(temperature=2.0),
                  dict(temperature=1.0, logit_bias={str(i): -100 for i in range(30, 130)})]
        names = ["realistic_order", "ref_recursive_list", "number_wide_range", "format_date_time"]
        jobs = [((name, k), CHAT, schema_body(BY_NAME[name]["schema"], seed=12, **p))
                for name in names for k, p in enumerate(params)]
        res = run_all(hc.MAIN.port, jobs)
        t = Tally("sampling parameters")
        for key, _, _ in jobs:
            t.response("%s params %r" % (key[0], params[key[1]]), res[key],
                       lambda c, s=BY_NAME[key[0]]["schema"]: json_errors(s, c["message"]["content"]))
        t.check(self)

    def test_g_concurrent_with_free_requests(self):
        """Constrained and free requests share batches: the free greedy reply and a constrained
        greedy reply are the same as when each runs alone."""
        free = chat_body(max_tokens=48, temperature=0, ignore_eos=True,
                         messages=[{"role": "user", "content": "Tell me a story."}])
        con = schema_body(BY_NAME["realistic_order"]["schema"], temperature=0)
        alone_free = post(hc.MAIN.port, CHAT, free).json()["choices"][0]["message"]["content"]
        alone_con = post(hc.MAIN.port, CHAT, con).json()["choices"][0]["message"]["content"]
        others = [schema_body(BY_NAME[n]["schema"], seed=s) for n in ("realistic_person", "ref_recursive_tree",
                                                                      "escaped_property_names") for s in (1, 2)]
        results = {}

        def go(key, path, body):
            results[key] = post(hc.MAIN.port, path, body)

        threads = [threading.Thread(target=go, args=(("other", k), CHAT, b)) for k, b in enumerate(others)]
        threads += [threading.Thread(target=go, args=(("free", 0), CHAT, free)),
                    threading.Thread(target=go, args=(("con", 0), CHAT, con)),
                    threading.Thread(target=go, args=(("free compl", 0), COMPL,
                                                      completion_body(max_tokens=32, temperature=0, ignore_eos=True)))]
        alone_compl = post(hc.MAIN.port, COMPL, completion_body(max_tokens=32, temperature=0, ignore_eos=True)
                           ).json()["choices"][0]["text"]
        for th in threads:
            th.start()
        for th in threads:
            th.join(300)
        for k, r in results.items():
            self.assertEqual(r.status, 200, (k, r))
        self.assertEqual(results[("free", 0)].json()["choices"][0]["message"]["content"], alone_free)
        self.assertEqual(results[("free compl", 0)].json()["choices"][0]["text"], alone_compl)
        self.assertEqual(results[("con", 0)].json()["choices"][0]["message"]["content"], alone_con)
        t = Tally("concurrent constrained")
        for k, b in enumerate(others):
            schema = b["response_format"]["json_schema"]["schema"]
            t.response("other %d" % k, results[("other", k)], lambda c, s=schema: json_errors(s, c["message"]["content"]))
        t.check(self, min_complete=0.5)
        m = hc.wait_metrics(hc.MAIN.port, hc.idle)
        self.assertTrue(hc.idle(m), "the server is idle afterwards")


# ----------------------------------------------------------------------------------------------
# 10d. Forced tool calls (Kimi Linear on the shared server, Kimi-K3 on its own)
# ----------------------------------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a place",
                                      "parameters": {
        "type": "object", "properties": {"location": {"type": "string", "maxLength": 20},
                                         "unit": {"enum": ["celsius", "fahrenheit"]},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["location", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer", "minimum": -1000, "maximum": 1000},
                                         "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
        "required": ["a", "b"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string", "maxLength": 20},
                                         "filters": {"type": "array", "items": {"enum": ["news", "images", "web"]},
                                                     "maxItems": 2},
                                         "limit": {"type": "integer", "minimum": 1, "maximum": 10}},
        "required": ["query"], "additionalProperties": False}}},
]
TOOL_PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
TOOL_MESSAGES = [{"role": "user", "content": "What is the weather in Paris, and what is 2 + 3?"}]


def stream_tool_calls(s):
    """[(name, arguments)] assembled from a stream's tool_call deltas (choice 0), and the finish."""
    calls, finish = {}, None
    for ev in s.events:
        for ch in ev["choices"]:
            for tc in ch["delta"].get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                fn = tc.get("function") or {}
                if fn.get("name"):
                    c["name"] += fn["name"]
                if fn.get("arguments"):
                    c["arguments"] += fn["arguments"]
            if ch.get("finish_reason") is not None:
                finish = ch["finish_reason"]
    return [(calls[i]["name"], calls[i]["arguments"]) for i in sorted(calls)], finish


def tool_call_errors(choice, names, exactly_one=False):
    """Why a reply's tool calls are not valid calls of `names` ([] when they are)."""
    msg = choice["message"]
    calls = msg.get("tool_calls") or []
    errs = []
    if not calls:
        return ["no tool_calls in %r" % (msg,)]
    if exactly_one and len(calls) != 1:
        errs.append("%d calls, want exactly one" % len(calls))
    if choice["finish_reason"] != "tool_calls":
        errs.append("finish_reason %r" % choice["finish_reason"])
    for c in calls:
        if c.get("type") != "function" or not isinstance(c.get("id"), str) or not c["id"]:
            errs.append("call shape %r" % c)
        name = c["function"]["name"]
        if name not in names:
            errs.append("call of %r, not one of %r" % (name, names))
            continue
        errs += ["%s: %s" % (name, e) for e in json_errors(TOOL_PARAMS[name], c["function"]["arguments"])]
    return errs


class _ToolCases:
    """Forced tool calls on self.port with self.extra (chat body fields), for both chat formats."""
    port = None
    extra = {}
    seeds = SEEDS + (44, 55)

    def body(self, **kw):
        b = chat_body(messages=TOOL_MESSAGES, tools=TOOLS, max_tokens=MAX_TOKENS, temperature=1.0)
        b.update(self.extra)
        b.update(kw)
        return b

    def _forced(self, what, names, exactly_one=False, **kw):
        jobs = [(seed, CHAT, self.body(seed=seed, **kw)) for seed in self.seeds]
        res = run_all(self.port, jobs)
        t = Tally(what)
        for seed, _, _ in jobs:
            t.response("seed %d" % seed, res[seed], lambda c: tool_call_errors(c, names, exactly_one))
        t.check(self)
        # streamed: the same calls for the same seed
        for seed in self.seeds[:2]:
            plain = res[seed].json()["choices"][0]
            s = stream(self.port, CHAT, self.body(seed=seed, stream=True, **kw))
            self.assertEqual(s.status, 200, s.raw_error)
            got, finish = stream_tool_calls(s)
            want = [(c["function"]["name"], c["function"]["arguments"]) for c in plain["message"].get("tool_calls") or []]
            self.assertEqual(got, want, "streamed tool calls != non-streamed (seed %d)" % seed)
            self.assertEqual(finish, plain["finish_reason"])
        return res

    def test_a_required(self):
        res = self._forced("tool_choice required", list(TOOL_PARAMS), tool_choice="required")
        counts = [len(r.json()["choices"][0]["message"].get("tool_calls") or []) for r in res.values() if r.status == 200]
        print("\n    calls per reply: %s" % counts, end=" ", flush=True)

    def test_b_named(self):
        for name in ("add", "search"):
            with self.subTest(name=name):
                self._forced("tool_choice %s" % name, [name],
                             tool_choice={"type": "function", "function": {"name": name}})

    def test_c_not_parallel(self):
        self._forced("parallel_tool_calls false", list(TOOL_PARAMS), exactly_one=True, tool_choice="required",
                     parallel_tool_calls=False)
        self._forced("named, parallel_tool_calls false", ["get_weather"], exactly_one=True,
                     tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False)

    def test_d_auto_and_none_unchanged(self):
        for tc in ("auto", "none"):
            r = post(self.port, CHAT, self.body(tool_choice=tc, max_tokens=16, temperature=0))
            self.assertEqual(r.status, 200, (tc, r))
        # "auto" is the default: the same greedy reply as without tool_choice
        a = post(self.port, CHAT, self.body(tool_choice="auto", max_tokens=16, temperature=0)).json()
        b = post(self.port, CHAT, self.body(max_tokens=16, temperature=0)).json()
        self.assertEqual(a["choices"][0]["message"], b["choices"][0]["message"])

    def test_e_bad_tool_choice(self):
        cases = [
            ("unknown name", dict(tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
            ("required without tools", dict(tool_choice="required", tools=None), "tool_choice"),
            ("named without tools", dict(tool_choice={"type": "function", "function": {"name": "add"}}, tools=None),
             "tool_choice"),
            ("bad tool parameters", dict(tool_choice="required", tools=[{"type": "function", "function": {
                "name": "f", "parameters": {"type": "object", "patternProperties": {"a": {}}}}}]), "patternProperties"),
            ("with response_format", dict(tool_choice="required", response_format={"type": "json_object"}), None),
            ("parallel_tool_calls str", dict(tool_choice="required", parallel_tool_calls="no"), None),
        ]
        failures = []
        for name, kw, want in cases:
            b = self.body(**kw)
            if b.get("tools") is None:
                b.pop("tools")
            r = post(self.port, CHAT, b)
            if r.status != 400:
                failures.append("%s: HTTP %d %r" % (name, r.status, r.body[:300]))
                continue
            try:
                e = check_error(self, r, 400, msg=name)
            except AssertionError as ex:
                failures.append("%s: %s" % (name, ex))
                continue
            if want and want not in e["message"] and want != e.get("param"):
                failures.append("%s: %r names neither in message nor param %r" % (name, e, want))
        if failures:
            self.fail("\n".join(failures))


class T10StructuredToolsKimiLinear(_ToolCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = hc.MAIN.port


K3 = None
K3_CLOSE_BIAS = {}     # logit_bias raising <|close|> so a random model's think channel ends soon


def k3_server():
    global K3
    if K3 is None:
        model = hc.make_model(seed=4, preset="k3-tiny")
        with open(os.path.join(model, "tokenizer_config.json"), encoding="utf-8") as f:
            added = json.load(f).get("added_tokens_decoder", {})
        for tid, tok in added.items():
            if tok.get("content") == "<|close|>":
                K3_CLOSE_BIAS[tid] = 6
        K3 = hc.Server("--max-model-len", "4096", model=model)
    return K3


class T10StructuredToolsK3(_ToolCases, unittest.TestCase):
    """The same on Kimi-K3 with thinking off (the constraint then covers the whole reply)."""
    extra = {"chat_template_kwargs": {"thinking": False}}

    @classmethod
    def setUpClass(cls):
        cls.port = k3_server().port


class T10StructuredToolsK3Thinking(_ToolCases, unittest.TestCase):
    """K3 with thinking on (the default): the think channel is free, then the forced calls. A
    logit_bias on <|close|> keeps a random model's thoughts short."""
    seeds = SEEDS[:2]

    @classmethod
    def setUpClass(cls):
        cls.port = k3_server().port
        cls.extra = {"logit_bias": dict(K3_CLOSE_BIAS)}


class T10StructuredK3ResponseFormat(unittest.TestCase):
    """response_format json_schema on K3: message.content validates; thinking on keeps free
    reasoning_content."""

    @classmethod
    def setUpClass(cls):
        cls.port = k3_server().port

    def _run(self, what, extra, names, seeds, min_complete=MIN_COMPLETE):
        jobs = [((name, seed), CHAT, schema_body(BY_NAME[name]["schema"], seed=seed, **extra))
                for name in names for seed in seeds]
        res = run_all(self.port, jobs)
        t = Tally(what)
        for key, _, _ in jobs:
            t.response("%s seed %d" % key, res[key],
                       lambda c, s=BY_NAME[key[0]]["schema"]: json_errors(s, c["message"].get("content")))
        t.check(self, min_complete)
        return res

    def test_a_thinking_off(self):
        names = ["realistic_order", "oneOf_tagged", "ref_recursive_list", "escaped_property_names",
                 "unicode_names_and_enum", "format_date_time", "enum_mixed", "type_list_scalars"]
        self._run("K3 json_schema, thinking off", {"chat_template_kwargs": {"thinking": False}}, names, SEEDS[:2])

    def test_a2_corpus_thinking_off(self):
        """The whole corpus, one seed, in K3's response channel."""
        self._run("K3 json_schema corpus, thinking off", {"chat_template_kwargs": {"thinking": False}},
                  [e["name"] for e in VALID], SEEDS[:1])

    def test_b_thinking_on(self):
        k3_server()
        names = ["realistic_person", "tool_like_weather", "anyOf_objects"]
        res = self._run("K3 json_schema, thinking on", {"logit_bias": dict(K3_CLOSE_BIAS)}, names, SEEDS[:2])
        for r in res.values():
            msg = r.json()["choices"][0]["message"]
            rc = msg.get("reasoning_content")
            self.assertTrue(rc is None or isinstance(rc, str), msg)

    def test_c_thinking_on_default_no_bias(self):
        """Without the bias the think channel may run to max_tokens; a complete reply is valid."""
        res = self._run("K3 json_schema, thinking on, no bias", {}, ["tool_like_weather"], SEEDS, min_complete=0.0)
        self.assertTrue(all(r.status == 200 for r in res.values()))

    def test_d_stream_equals_non_stream(self):
        for extra in ({"chat_template_kwargs": {"thinking": False}}, {"logit_bias": dict(K3_CLOSE_BIAS)}):
            body = schema_body(BY_NAME["realistic_person"]["schema"], seed=21, **extra)
            plain = post(self.port, CHAT, body)
            self.assertEqual(plain.status, 200, plain)
            ch = plain.json()["choices"][0]
            s = stream(self.port, CHAT, dict(body, stream=True))
            self.assertEqual(s.status, 200, s.raw_error)
            content, reasoning, finish = [], [], None
            for ev in s.events:
                for c in ev["choices"]:
                    if c["delta"].get("content"):
                        content.append(c["delta"]["content"])
                    if c["delta"].get("reasoning_content"):
                        reasoning.append(c["delta"]["reasoning_content"])
                    if c.get("finish_reason") is not None:
                        finish = c["finish_reason"]
            self.assertEqual("".join(content), ch["message"].get("content") or "", extra)
            self.assertEqual("".join(reasoning), ch["message"].get("reasoning_content") or "", extra)
            self.assertEqual(finish, ch["finish_reason"])

    def test_e_regex_and_choice(self):
        t = Tally("K3 regex / choice")
        for seed in SEEDS[:2]:
            for kw, ok in ((dict(guided_regex=REGEXES[0][1]), lambda s: re.fullmatch(REGEXES[0][1], s or "")),
                           (dict(guided_choice=CHOICES[2][1]), lambda s: s in CHOICES[2][1])):
                r = post(self.port, CHAT, chat_body(max_tokens=MAX_TOKENS, temperature=1.0, seed=seed,
                                                    chat_template_kwargs={"thinking": False}, **kw))
                t.response("%r seed %d" % (kw, seed), r,
                           lambda c, ok=ok: [] if ok(c["message"].get("content")) else ["no match"])
        t.check(self)


if __name__ == "__main__":
    unittest.main()
