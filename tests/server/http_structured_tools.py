"""HTTP tests, part 11: forced tool calls (tool_choice "required" / named, parallel_tool_calls
false) on Kimi Linear (the shared server) and on a Kimi-K3 server with thinking off and on: tool
names and arguments valid against each tool's parameters (jsonschema), stream == non-stream;
"auto" unchanged; bad tool_choice -> 400; and K3 response_format json_schema (thinking on and
off). Run through http_test.py (`-k Structured`).
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

from http_structured_common import *  # noqa: F401,F403



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
