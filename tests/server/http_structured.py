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
  (forced tool calls and K3's response_format: http_structured_tools.py; the shared corpus,
  validators and bodies: http_structured_common.py)
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

from http_structured_common import *  # noqa: F401,F403 (the shared corpus, validators, bodies)

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

        # A random model ends an object by chance: 40 + 40 seeds finished 35 and 38 times on an
        # AVX2 machine (91 %), 8 of 11 on one draw of seeds. Enough replies, and a floor below the
        # rate, so that a fair draw passes on any CPU (another ISA rounds differently).
        jobs = []
        for seed in SEEDS + (44, 55, 66, 77, 88, 99, 111, 122):
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
        t.check(self, min_complete=0.7)

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
