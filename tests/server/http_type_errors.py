"""HTTP tests, part 16: a client's JSON of the wrong type is a 400 naming the field, never a 5xx,
on the routes that convert a body to a chat (issue 56), on a Kimi Linear and a Kimi-K3 server:

- /v1/responses: text.format.name of 5, true, {} or [] (once a 500, a JSON type error) is a 400
  with param "text" naming text.format.name, and null is absent (200); text.format.strict, an
  input item's type, tools[].description and tools[].parameters, parallel_tool_calls and
  max_output_tokens of the wrong type are 400s naming them; null fields echo their defaults;
- /v1/messages and /v1/messages/count_tokens: a tool_use id used twice in one request is a 400
  naming the block; a tool_result whose tool_use_id matches no earlier tool_use (an agent's
  trimmed history) is served, alone or beside matched results;
- the server still serves a normal request afterwards.
Errors on the Anthropic routes have Anthropic's shape (no param: the message names the field).
Run through http_test.py.
"""
import json
import unittest

import http_common as hc
from http_common import Resp, Server, post

SERVED = hc.SERVED
MSG = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}
FN = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
TOOL = {"name": "f", "description": "a tool", "input_schema": {"type": "object", "properties": {}}}


def responses(**kw):
    b = {"model": SERVED, "input": "hi", "max_output_tokens": 1, "store": False}
    b.update(kw)
    return b


def messages(msgs, **kw):
    b = {"model": SERVED, "max_tokens": 1, "messages": msgs}
    b.update(kw)
    return b


def with_name(name):
    return responses(text={"format": {"type": "json_schema", "name": name, "schema": SCHEMA}})


def tool_use(tid, name="f"):
    return {"type": "tool_use", "id": tid, "name": name, "input": {}}


def tool_result(tid, content="ok"):
    return {"type": "tool_result", "tool_use_id": tid, "content": content}


def cases():
    """(route, body, status, param (OpenAI routes), text the error message must hold)."""
    out = []
    for name in (5, True, {}, []):
        out.append(("/v1/responses", with_name(name), 400, "text", "text.format.name must be a string"))
    out += [
        ("/v1/responses", with_name(None), 200, None, ""),
        ("/v1/responses", with_name("answer"), 200, None, ""),
        ("/v1/responses", responses(text={"format": {"type": "json_schema", "schema": SCHEMA, "strict": "yes"}}), 400,
         "text", "text.format.strict must be a boolean"),
        ("/v1/responses", responses(text={"format": {"type": "json_schema", "schema": SCHEMA, "strict": None}}), 200,
         None, ""),
        ("/v1/responses", responses(input=[{"type": 5, "role": "user", "content": "hi"}]), 400, "input",
         "input[0].type must be a string"),
        ("/v1/responses", responses(input=[{"type": None, "role": "user", "content": "hi"}]), 200, None, ""),
        ("/v1/responses", responses(tools=[dict(FN, description=5)]), 400, "tools", "tools[0].description must be a string"),
        ("/v1/responses", responses(tools=[dict(FN, description=None)]), 200, None, ""),
        ("/v1/responses", responses(tools=[dict(FN, parameters="{}")]), 400, "tools", "tools[0].parameters must be an object"),
        ("/v1/responses", responses(tools=[dict(FN, parameters=None)]), 200, None, ""),
        ("/v1/responses", responses(parallel_tool_calls="no"), 400, "parallel_tool_calls",
         "parallel_tool_calls must be a boolean"),
        ("/v1/responses", responses(parallel_tool_calls=None), 200, None, ""),
        ("/v1/responses", responses(max_output_tokens="1"), 400, "max_output_tokens", "max_output_tokens must be"),
        ("/v1/responses", responses(max_output_tokens=0), 400, "max_output_tokens", "max_output_tokens must be"),
    ]
    dup = MSG + [{"role": "assistant", "content": [tool_use("t1"), tool_use("t2")]},
                 {"role": "user", "content": [tool_result("t1"), tool_result("t2")]},
                 {"role": "assistant", "content": [tool_use("t1")]}]
    orphan_alone = [{"role": "user", "content": [tool_result("toolu_gone", "trimmed"), {"type": "text", "text": "go on"}]}]
    orphan_beside = MSG + [{"role": "assistant", "content": [tool_use("t1"), tool_use("t2", "g")]},
                           {"role": "user", "content": [tool_result("t2"), tool_result("toolu_gone"), tool_result("t1")]}]
    for route in ("/v1/messages", "/v1/messages/count_tokens"):
        out += [
            (route, messages(dup), 400, None, 'messages[3].content[0]: tool_use id "t1" is used twice'),
            (route, messages(orphan_alone), 200, None, ""),
            (route, messages(orphan_beside, tools=[TOOL, dict(TOOL, name="g")]), 200, None, ""),
        ]
    return out


class T16TypeErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.servers = {"kimi-linear": Server(model=hc.make_model(seed=7)),
                       "k3": Server(model=hc.make_model(seed=8, preset="k3-tiny"))}

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers.values():
            s.kill()

    def check_answer(self, r, route, status, param, needle, what):
        self.assertIsInstance(r, Resp, what)
        self.assertEqual(r.status, status, "%s: %s" % (what, r))
        if status == 200:
            return
        j = r.json()
        if route.startswith("/v1/messages"):   # Anthropic's shape: {"type": "error", "error": {type, message}}
            self.assertEqual(j.get("type"), "error", "%s: %r" % (what, j))
            e = j["error"]
            self.assertEqual(e.get("type"), "invalid_request_error", "%s: %r" % (what, j))
        else:
            hc.check_error(self, r, status, param, what)
            e = j["error"]
        self.assertIn(needle, e["message"], what)

    def test_wrong_types_are_400s(self):
        for name, srv in self.servers.items():
            for route, body, status, param, needle in cases():
                what = "%s %s %.160s" % (name, route, json.dumps(body))
                with self.subTest(case=what):
                    r = post(srv.port, route, body, timeout=60)
                    self.assertTrue(srv.alive(), "the server died on " + what)
                    self.check_answer(r, route, status, param, needle, what)
            r = post(srv.port, "/v1/responses", responses())
            self.assertEqual(r.status, 200, "%s after the cases: %s" % (name, r))

    def test_null_fields_echo_their_defaults(self):
        srv = self.servers["kimi-linear"]
        r = post(srv.port, "/v1/responses", responses(temperature=None, top_p=None, tool_choice=None, tools=None,
                                                      parallel_tool_calls=None, metadata=None, text=None))
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual((j["temperature"], j["top_p"], j["tool_choice"], j["tools"], j["parallel_tool_calls"],
                          j["metadata"], j["text"]),
                         (1.0, 1.0, "auto", [], True, {}, {"format": {"type": "text"}}), j)

    def test_orphan_tool_result_counts_as_a_tool_message(self):
        # a result with no earlier tool_use is rendered as the tool message it is: it adds tokens
        for name, srv in self.servers.items():
            base = post(srv.port, "/v1/messages/count_tokens", messages([{"role": "user", "content": "go on"}]))
            self.assertEqual(base.status, 200, "%s: %s" % (name, base))
            r = post(srv.port, "/v1/messages/count_tokens", messages([{"role": "user", "content": [
                tool_result("toolu_gone", "trimmed"), {"type": "text", "text": "go on"}]}]))
            self.assertEqual(r.status, 200, "%s: %s" % (name, r))
            self.assertGreater(r.json()["input_tokens"], base.json()["input_tokens"], name)


if __name__ == "__main__":
    unittest.main()
