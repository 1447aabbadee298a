"""Shared helpers of the structured-output HTTP tests (http_structured.py, http_structured_tools.py):
the schema corpus (data/json_schemas.json), the independent validators (jsonschema with a format
checker, RFC 3339 checks, re.fullmatch, hand-written GBNF checkers), the Tally of completed and
valid replies, request bodies and the regexes, choices and grammars the tests send.
"""
import concurrent.futures
import datetime
import json
import math
import os
import re
import sys
import threading
import time
import unittest

import jsonschema

import http_common as hc
from http_common import chat_body, check_error, completion_body, post, stream


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
        sys.stderr.write("  [structured] %s\n" % summary)
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
