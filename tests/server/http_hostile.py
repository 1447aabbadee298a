"""HTTP tests, part 12: what a hostile client sent that once took the server down (issue 28's
reproducers), on a Kimi Linear and a Kimi-K3 server each: every case is answered (a 400 naming
the limit, or a 200), the server stays up, and it still serves a normal request afterwards.

- deep GBNF group nesting (20,000 levels) in guided_grammar and structured_outputs.grammar;
- JSON Schema given as text nested 100,000 deep (guided_json, response_format.json_schema.schema,
  a deep `description` beside `nullable`);
- tool-call arguments nested 50,000 deep in an assistant message (chat and /tokenize; they
  crashed the K3 renderer);
- and beside them what stays legal: a chain of 20,000 GBNF rules, a regex nested past its limit;
- amplification: 256 prompts × n 128 in a 2 KB body is a 400 naming --max-sequences-per-request
  (default 64), 64 sequences are served;
- /v1/models of a server started without --served-model-name shows no path;
- Content-Length read strictly: "+18", "18, 18", "-1", "0x12", "18\\0" are a 400 closing the connection,
  "18" and " 18" (whitespace HTTP allows) are served;
- long single-word prompts (8 MiB) to /tokenize leave no per-thread scratch behind (each used to
  keep ~7 bytes of resident memory per prompt byte in its HTTP thread for good);
- objects of 200,000 keys (2.3 MB bodies; 32 s each with the quadratic parser) answered in well
  under a second, in an unknown field and in logit_bias.
Run through http_test.py.
"""
import unittest

import http_common as hc
import os
import socket
import time

from http_common import Resp, Server, chat_body, check_error, completion_body, get, post

MSG = [{"role": "user", "content": "hi"}]


def deep(n):
    return "[" * n + "]" * n


def cases():
    nested_gbnf = "root ::= " + "(" * 20000 + '"a"' + ")" * 20000
    args = '{"a":' + deep(50000) + "}"
    tool_msgs = MSG + [{"role": "assistant", "content": "",
                        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]},
                       {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    return [
        # (path, body, expected status, text the error message must hold)
        ("/v1/completions", {"prompt": "a", "max_tokens": 1, "guided_grammar": nested_gbnf}, 400,
         "groups nested deeper than 100 levels"),
        ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "structured_outputs": {"grammar": nested_gbnf}}, 400,
         "groups nested deeper than 100 levels"),
        ("/v1/completions", {"prompt": "a", "max_tokens": 1, "guided_json": '{"const":' + deep(100000) + "}"}, 400,
         "nested deeper than 64 levels"),
        # K3 renders the schema into the prompt, and the constraint is compiled after the context
        # check (issue 56): there the 200,000-token prompt is refused first
        ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "response_format": {
            "type": "json_schema", "json_schema": {"name": "x", "schema": '{"enum":[' + deep(100000) + "]}"}}}, 400,
         ("nested deeper than 64 levels", "maximum context length")),
        ("/v1/completions", {"prompt": "a", "max_tokens": 1,
                             "guided_json": '{"nullable":true,"description":' + deep(100000) + "}"}, 400,
         "nested deeper than 64 levels"),
        ("/v1/completions", {"prompt": "a", "max_tokens": 1, "guided_regex": "(" * 20000 + "a" + ")" * 20000}, 400,
         "groups nested too deeply"),
        ("/v1/completions", {"prompt": "a", "max_tokens": 1, "guided_grammar": "\n".join(
            "r%d ::= r%d" % (i, i + 1) for i in range(20000)) + '\nr20000 ::= "a"\nroot ::= r0'}, 200, ""),
        ("/v1/chat/completions", {"messages": tool_msgs, "max_tokens": 1}, None, "arguments nested deeper than 64 levels"),
        ("/tokenize", {"messages": tool_msgs}, None, "arguments nested deeper than 64 levels"),
        # found by fuzz_request: a non-string "type" was a 500 (a JSON type error), not a 400
        ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "tools": [{"type": {}}]}, 400, "each tool must be"),
        ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "tool_choice": {"type": 1}, "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}, 400, "tool_choice must be"),
    ]


class T12Hostile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.servers = {"kimi-linear": Server(model=hc.make_model(seed=7)),
                       "k3": Server(model=hc.make_model(seed=8, preset="k3-tiny"))}

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers.values():
            s.kill()

    def test_deep_nesting_inside_strings(self):
        for name, srv in self.servers.items():
            for path, body, status, needle in cases():
                what = "%s %s %.60s" % (name, path, str(body))
                with self.subTest(case=what):
                    r = post(srv.port, path, body, timeout=60)
                    self.assertTrue(srv.alive(), "the server died on " + what)
                    self.assertIsInstance(r, Resp, what)
                    # Kimi Linear writes tool-call arguments through as text: a 200 (or the
                    # context limit's 400); K3 parses them and must refuse past the limit
                    if status is None and name != "k3":
                        self.assertIn(r.status, (200, 400), "%s: %s" % (what, r))
                        continue
                    want = 400 if status is None else status
                    self.assertEqual(r.status, want, "%s: %s" % (what, r))
                    if want == 400 and needle:
                        check_error(self, r, 400, None, what)
                        message = r.json()["error"]["message"]
                        needles = needle if isinstance(needle, tuple) else (needle,)
                        self.assertTrue(any(n in message for n in needles), "%s: %s" % (what, message))
            r = post(srv.port, "/v1/chat/completions", chat_body(max_tokens=2))
            self.assertEqual(r.status, 200, "%s after the cases: %s" % (name, r))

    def test_sequences_per_request_are_bounded(self):
        srv = self.servers["kimi-linear"]
        for body in (completion_body(prompt=[[1]] * 256, n=128, max_tokens=4), completion_body(prompt=[[1]] * 65, max_tokens=1),
                     chat_body(n=65, max_tokens=1)):
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            r = post(srv.port, path, body)
            check_error(self, r, 400, "n", path)
            self.assertIn("--max-sequences-per-request", r.json()["error"]["message"])
        r = post(srv.port, "/v1/completions", completion_body(prompt=[[1]] * 8, n=8, max_tokens=1))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.json()["choices"]), 64)

    def test_many_keys_parse_in_linear_time(self):
        srv = self.servers["kimi-linear"]
        keys = ",".join('"k%d":1' % i for i in range(200000))
        bias = ",".join('"%d":1' % i for i in range(200000))
        for path, body, status in (("/tokenize", '{"prompt":"hi","junk":{' + keys + "}}", 200),
                                   ("/v1/completions", '{"prompt":"hi","max_tokens":1,"logit_bias":{' + bias + "}}", 400)):
            t0 = time.monotonic()
            r = post(srv.port, path, body.encode())
            took = time.monotonic() - t0
            self.assertEqual(r.status, status, "%s: %s" % (path, r))
            self.assertLess(took, 2.0, "%s took %.1f s for a %d-byte body" % (path, took, len(body)))

    def test_content_length_is_strict(self):
        srv = self.servers["kimi-linear"]
        body = b'{"prompt":"hello"}'
        for value, status in ((b"18", 200), (b" 18", 200), (b"+18", 400), (b"18, 18", 400), (b"-1", 400), (b"0x12", 400), (b"18\x00", 400)):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
                s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: " + value + b"\r\n\r\n" + body)
                data = b""
                while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            line = data.split(b"\r\n", 1)[0]
            self.assertTrue(line.startswith(b"HTTP/1.1 %d" % status), (value, data[:300]))
            if status == 400:
                self.assertIn(b"invalid Content-Length", data)
                self.assertIn(b"Connection: close", data)

    def test_long_words_leave_no_memory_behind(self):
        srv = self.servers["kimi-linear"]

        def rss_mb():
            with open("/proc/%d/status" % srv.proc.pid) as fh:
                return next(int(l.split()[1]) for l in fh if l.startswith("VmRSS:")) / 1024.0

        body = ('{"prompt":"' + "a" * (8 << 20) + '"}').encode()
        r = post(srv.port, "/tokenize", body, timeout=120)   # warm-up: the first one may size shared state
        self.assertEqual(r.status, 200, r)
        base = rss_mb()
        for _ in range(4):
            r = post(srv.port, "/tokenize", body, timeout=120)
            self.assertEqual(r.status, 200, r)
        grown = rss_mb() - base
        self.assertLess(grown, 150.0, "RSS grew by %.0f MB over 4 prompts of 8 MiB" % grown)

    def test_models_show_no_path(self):
        model = hc.make_model(seed=9)
        srv = Server(model=model, served=None)
        try:
            r = get(srv.port, "/v1/models")
            self.assertEqual(r.status, 200, r)
            card = r.json()["data"][0]
            self.assertEqual(card["id"], os.path.basename(model))
            self.assertEqual(card["root"], card["id"])
            self.assertNotIn(os.path.dirname(model), r.body.decode())
        finally:
            srv.kill()


if __name__ == "__main__":
    unittest.main()
