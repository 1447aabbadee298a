"""HTTP tests, parts 3 and 4: every request the server must refuse, and --api-key auth.

3. bad input  every invalid request -> its 4xx with OpenAI's error JSON (shared server); context
              limits on a --max-model-len 64 server; deeply nested JSON; 413 on a --max-body-mb 1
              server; unknown routes; no harm afterwards (and no 5xx ever)
4. auth       --api-key: 401 without/with a wrong key, 200 with it; /health, /metrics, /version open
Run through http_test.py.
"""
import http.client
import json
import socket
import threading
import unittest

import http_common as hc
from http_common import (POST_ROUTES, Resp, Server, chat_body, check_error, completion_body, get, idle, metrics,
                         parse_prometheus, post, request, stream, wait_metrics)

setUpModule = hc.setup_shared      # the model and the shared server: once, for all the modules


# ----------------------------------------------------------------------------------------------
# 3. Bad input
# ----------------------------------------------------------------------------------------------

BIG = 10 ** 30

# (name, body overrides, expected status, expected param or None) — for both endpoints
COMMON_BAD = [
    ("temperature str", {"temperature": "hot"}, 400, "temperature"),
    ("temperature <0", {"temperature": -0.1}, 400, "temperature"),
    ("temperature >2", {"temperature": 2.5}, 400, "temperature"),
    ("temperature bool", {"temperature": True}, 400, "temperature"),
    ("top_p 0", {"top_p": 0}, 400, "top_p"),
    ("top_p >1", {"top_p": 1.5}, 400, "top_p"),
    ("top_p str", {"top_p": "1"}, 400, "top_p"),
    ("top_k -2", {"top_k": -2}, 400, "top_k"),
    ("top_k float", {"top_k": 1.5}, 400, "top_k"),
    ("top_k str", {"top_k": "5"}, 400, "top_k"),
    ("min_p <0", {"min_p": -0.1}, 400, "min_p"),
    ("min_p >1", {"min_p": 1.1}, 400, "min_p"),
    ("n 0", {"n": 0}, 400, "n"),
    ("n 1000", {"n": 1000}, 400, "n"),
    ("n 129", {"n": 129}, 400, "n"),
    ("n true", {"n": True}, 400, "n"),
    ("n float", {"n": 1.5}, 400, "n"),
    ("n str", {"n": "2"}, 400, "n"),
    ("max_tokens 0", {"max_tokens": 0}, 400, "max_tokens"),
    ("max_tokens -1", {"max_tokens": -1}, 400, "max_tokens"),
    ("max_tokens float", {"max_tokens": 1.5}, 400, "max_tokens"),
    ("max_tokens str", {"max_tokens": "8"}, 400, "max_tokens"),
    ("max_tokens bool", {"max_tokens": True}, 400, "max_tokens"),
    ("max_tokens huge", {"max_tokens": BIG}, 400, None),
    ("max_tokens > context", {"max_tokens": 5000}, 400, None),
    ("max_completion_tokens 0", {"max_completion_tokens": 0}, 400, "max_completion_tokens"),
    ("stop empty", {"stop": ""}, 400, "stop"),
    ("stop [empty]", {"stop": ["a", ""]}, 400, "stop"),
    ("stop [int]", {"stop": [1]}, 400, "stop"),
    ("stop int", {"stop": 5}, 400, "stop"),
    ("stop object", {"stop": {"a": 1}}, 400, "stop"),
    ("stop_token_ids out of vocab", {"stop_token_ids": [99999999]}, 400, "stop_token_ids"),
    ("stop_token_ids negative", {"stop_token_ids": [-1]}, 400, "stop_token_ids"),
    ("stop_token_ids str", {"stop_token_ids": "5"}, 400, "stop_token_ids"),
    ("stop_token_ids [str]", {"stop_token_ids": ["5"]}, 400, "stop_token_ids"),
    ("seed str", {"seed": "x"}, 400, "seed"),
    ("seed float", {"seed": 1.5}, 400, "seed"),
    ("presence_penalty 3", {"presence_penalty": 3}, 400, "presence_penalty"),
    ("frequency_penalty -3", {"frequency_penalty": -3}, 400, "frequency_penalty"),
    ("repetition_penalty 0", {"repetition_penalty": 0}, 400, "repetition_penalty"),
    ("repetition_penalty 11", {"repetition_penalty": 11}, 400, "repetition_penalty"),
    ("logit_bias key not id", {"logit_bias": {"abc": 1}}, 400, "logit_bias"),
    ("logit_bias key out of vocab", {"logit_bias": {"99999999": 1}}, 400, "logit_bias"),
    ("logit_bias key negative", {"logit_bias": {"-1": 1}}, 400, "logit_bias"),
    ("logit_bias value 200", {"logit_bias": {"1": 200}}, 400, "logit_bias"),
    ("logit_bias value str", {"logit_bias": {"1": "x"}}, 400, "logit_bias"),
    ("logit_bias array", {"logit_bias": [1]}, 400, "logit_bias"),
    ("ignore_eos str", {"ignore_eos": "yes"}, 400, "ignore_eos"),
    ("ignore_eos int", {"ignore_eos": 1}, 400, "ignore_eos"),
    ("stream str", {"stream": "yes"}, 400, "stream"),
    ("stream_options without stream", {"stream_options": {"include_usage": True}}, 400, "stream_options"),
    ("stream_options stream false", {"stream": False, "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ("stream_options not object", {"stream": True, "stream_options": 1}, 400, "stream_options"),
    ("response_format type", {"response_format": {"type": "xml"}}, 400, "response_format"),
    ("response_format json_schema no schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     400, "response_format"),
    ("response_format str", {"response_format": "text"}, 400, "response_format"),
    ("guided_json keyword", {"guided_json": {"type": "object", "patternProperties": {}}}, 400, "guided_json"),
    ("guided_regex backreference", {"guided_regex": "(a)\\1"}, 400, "guided_regex"),
    ("guided_choice empty", {"guided_choice": []}, 400, "guided_choice"),
    ("guided_grammar no root", {"guided_grammar": "start ::= \"a\""}, 400, "guided_grammar"),
    ("two constraints", {"guided_regex": "a+", "guided_choice": ["a"]}, 400, "guided_choice"),
    ("structured_outputs kind", {"structured_outputs": {"xml": "a"}}, 400, "structured_outputs"),
    ("prompt_logprobs", {"prompt_logprobs": 1}, 400, "prompt_logprobs"),
    ("model unknown", {"model": "gpt-4o"}, 404, "model"),
    ("model int", {"model": 5}, (400, 404), None),
]

CHAT_BAD = [
    ("messages empty", {"messages": []}, 400, "messages"),
    ("messages missing", {"messages": None}, 400, None),
    ("messages str", {"messages": "hi"}, 400, "messages"),
    ("messages [int]", {"messages": [5]}, 400, "messages"),
    ("messages content int", {"messages": [{"role": "user", "content": 5}]}, 400, "messages"),
    ("messages no role", {"messages": [{"content": "hi"}]}, 400, "messages"),
    ("messages image", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}, 400, "messages"),
    ("logprobs str", {"logprobs": "yes"}, 400, "logprobs"),
    ("logprobs int", {"logprobs": 1}, 400, "logprobs"),
    ("top_logprobs without logprobs", {"top_logprobs": 5}, 400, "top_logprobs"),
    ("top_logprobs logprobs false", {"logprobs": False, "top_logprobs": 5}, 400, "top_logprobs"),
    ("top_logprobs 21", {"logprobs": True, "top_logprobs": 21}, 400, "top_logprobs"),
    ("top_logprobs -1", {"logprobs": True, "top_logprobs": -1}, 400, "top_logprobs"),
    ("tools str", {"tools": "x"}, 400, "tools"),
    ("tools no function", {"tools": [{"type": "function"}]}, 400, "tools"),
    ("tools wrong type", {"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, 400, "tools"),
    ("tools name int", {"tools": [{"type": "function", "function": {"name": 5}}]}, 400, "tools"),
    ("tool_choice required without tools", {"tool_choice": "required"}, 400, "tool_choice"),
    ("tool_choice unknown function", {"tool_choice": {"type": "function", "function": {"name": "g"}},
                                      "tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "tool_choice"),
    ("tool_choice with response_format", {"tool_choice": "required", "response_format": {"type": "json_object"},
                                          "tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "tool_choice"),
    ("tool_choice bogus", {"tool_choice": "sometimes"}, 400, "tool_choice"),
]

COMPLETION_BAD = [
    ("prompt empty", {"prompt": ""}, 400, "prompt"),
    ("prompt missing", {"prompt": None}, 400, "prompt"),
    ("prompt []", {"prompt": []}, 400, "prompt"),
    ("prompt [[]]", {"prompt": [[]]}, 400, "prompt"),
    ("prompt [\"\"]", {"prompt": ["a", ""]}, 400, "prompt"),
    ("prompt int", {"prompt": 5}, 400, "prompt"),
    ("prompt object", {"prompt": {"text": "hi"}}, 400, "prompt"),
    ("prompt token out of range", {"prompt": [1, 99999999]}, 400, "prompt"),
    ("prompt token negative", {"prompt": [1, -1]}, 400, "prompt"),
    ("prompt token float", {"prompt": [1, 2.5]}, 400, "prompt"),
    ("prompt token str mixed", {"prompt": [1, "a"]}, 400, "prompt"),
    ("prompt nested out of range", {"prompt": [[1, 2], [3, 99999999]]}, 400, "prompt"),
    ("prompt token huge", {"prompt": [2 ** 63]}, 400, "prompt"),
    ("prompt [[int] , int]", {"prompt": [[1], 2]}, 400, "prompt"),
    ("suffix", {"suffix": "the end"}, 400, "suffix"),
    ("echo with logprobs", {"echo": True, "logprobs": 1}, 400, None),
    ("echo str", {"echo": "yes"}, 400, "echo"),
    ("logprobs bool", {"logprobs": True}, 400, "logprobs"),
    ("logprobs 21", {"logprobs": 21}, 400, "logprobs"),
    ("logprobs -1", {"logprobs": -1}, 400, "logprobs"),
    ("logprobs str", {"logprobs": "2"}, 400, "logprobs"),
]

# bodies that are not a JSON object, for every POST endpoint
RAW_BAD = [
    ("malformed", b'{"model": "kimi-tiny", "prompt": '),
    ("trailing garbage", b'{"prompt": "hi"} xyz'),
    ("array", b'[{"prompt": "hi"}]'),
    ("null", b"null"),
    ("number", b"42"),
    ("string", b'"hello"'),
    ("empty", b""),
    ("NaN", b'{"prompt": "hi", "temperature": NaN}'),
    ("invalid utf-8", b'{"prompt": "\xff\xfe hi"}'),
    ("lone surrogate", b'{"prompt": "\\ud800"}'),
    ("single quotes", b"{'prompt': 'hi'}"),
    ("comment", b'{"prompt": "hi" /* c */}'),
]



def with_overrides(base, over):
    b = dict(base)
    for k, v in over.items():
        if v is None:
            b.pop(k, None)
        else:
            b[k] = v
    return b


class T3BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m0 = metrics(hc.MAIN.port)

    def _expect(self, path, body, status, param, name):
        r = post(hc.MAIN.port, path, body)
        check_error(self, r, status, param, "%s %s" % (path, name))

    def test_a_common_fields(self):
        for name, over, status, param in COMMON_BAD:
            for path, base in (("/v1/chat/completions", chat_body()), ("/v1/completions", completion_body())):
                with self.subTest(path=path, case=name):
                    self._expect(path, with_overrides(base, over), status, param, name)
                    # the same request streamed fails the same way, before any SSE
                    body = with_overrides(base, over)
                    if "stream" not in over and "stream_options" not in over:
                        body["stream"] = True
                        self._expect(path, body, status, param, name + " (stream)")

    def test_b_chat_fields(self):
        for name, over, status, param in CHAT_BAD:
            with self.subTest(case=name):
                self._expect("/v1/chat/completions", with_overrides(chat_body(), over), status, param, name)

    def test_c_completion_fields(self):
        for name, over, status, param in COMPLETION_BAD:
            with self.subTest(case=name):
                self._expect("/v1/completions", with_overrides(completion_body(), over), status, param, name)

    def test_d_bodies_not_json_objects(self):
        for path in POST_ROUTES:
            for name, raw in RAW_BAD:
                with self.subTest(path=path, case=name):
                    r = post(hc.MAIN.port, path, raw)
                    check_error(self, r, 400, None, "%s %s" % (path, name))

    def test_e_tokenize_detokenize(self):
        cases = [
            ("/tokenize", {}, 400),
            ("/tokenize", {"prompt": 5}, 400),
            ("/tokenize", {"prompt": None}, 400),
            ("/tokenize", {"prompt": "hi", "model": "nope"}, 404),
            ("/tokenize", {"messages": []}, 400),
            ("/tokenize", {"messages": "hi"}, 400),
            ("/tokenize", {"messages": [{"role": "user", "content": 5}]}, 400),
            ("/detokenize", {}, 400),
            ("/detokenize", {"tokens": "1 2"}, 400),
            ("/detokenize", {"tokens": [99999999]}, 400),
            ("/detokenize", {"tokens": [-1]}, 400),
            ("/detokenize", {"tokens": [hc.VOCAB + 100]}, 400),
            ("/detokenize", {"tokens": [1.5]}, 400),
            ("/detokenize", {"tokens": [[1]]}, 400),
            ("/detokenize", {"tokens": [2 ** 64 - 1]}, 400),
            ("/detokenize", {"tokens": [2 ** 63]}, 400),
            ("/detokenize", {"tokens": [-2 ** 63]}, 400),
        ]
        for path, body, status in cases:
            with self.subTest(path=path, body=body):
                check_error(self, post(hc.MAIN.port, path, body), status, None, "%s %r" % (path, body))
        r = post(hc.MAIN.port, "/detokenize", {"tokens": [hc.VOCAB - 1]})
        self.assertEqual(r.status, 200, r)

    def test_f_routes(self):
        cases = [("GET", "/v1/chat/completions"), ("GET", "/v1/completions"), ("GET", "/tokenize"),
                 ("GET", "/detokenize"), ("GET", "/nope"), ("GET", "/v1/nope"), ("GET", "/v1/models/extra"),
                 ("POST", "/v1/models"), ("POST", "/nope"), ("POST", "/health"), ("PUT", "/v1/chat/completions"),
                 ("DELETE", "/health"), ("PATCH", "/v1/models")]
        for method, path in cases:
            with self.subTest(method=method, path=path):
                body = b"{}" if method in ("POST", "PUT", "PATCH") else None
                r = request(hc.MAIN.port, method, path, body)
                check_error(self, r, (404, 405), None, "%s %s" % (method, path))

    def test_g_post_without_content_length(self):
        # a POST with neither Content-Length nor chunked encoding: a 4xx, not a hang or 5xx
        s = socket.create_connection(("127.0.0.1", hc.MAIN.port), timeout=30)
        try:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Connection: close\r\n\r\n")
            r = http.client.HTTPResponse(s)
            r.begin()
            body = r.read()
            self.assertTrue(400 <= r.status < 500, (r.status, body))
        finally:
            s.close()

    def test_z_no_harm(self):
        # runs last in this class: after every bad request the server still serves normally
        r = get(hc.MAIN.port, "/health")
        self.assertEqual(r.status, 200, r)
        r = post(hc.MAIN.port, "/v1/chat/completions", chat_body(max_tokens=4, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["finish_reason"], "length")
        r = post(hc.MAIN.port, "/v1/completions", completion_body(max_tokens=4, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        s = stream(hc.MAIN.port, "/v1/completions", completion_body(max_tokens=4, ignore_eos=True, stream=True))
        self.assertTrue(s.done)
        m1 = metrics(hc.MAIN.port)
        self.assertEqual(m1['kimi:http_responses_total{code="5xx"}'], 0, "a 5xx was answered")
        self.assertGreater(m1['kimi:http_responses_total{code="4xx"}'], self.m0['kimi:http_responses_total{code="4xx"}'])
        m1 = wait_metrics(hc.MAIN.port, idle, timeout=5)     # the engine gauges may lag by a step
        self.assertEqual(m1["kimi:num_requests_running"], 0)
        self.assertEqual(m1["kimi:num_requests_waiting"], 0)
        self.assertEqual(m1["kimi:cache_blocks_used"], 0)
        self.assertEqual(m1["kimi:state_slots_used"], 0)


class T3ContextLimits(unittest.TestCase):
    """--max-model-len 64: the prompt alone >= 64 -> 400; prompt + max_tokens > 64 -> 400."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-model-len", "64")

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()

    def test_limits(self):
        port = self.srv.port
        self.assertEqual(get(port, "/v1/models").json()["data"][0]["max_model_len"], 64)
        long_text = "the quick brown fox jumps over the lazy dog " * 40
        n_long = post(port, "/tokenize", {"prompt": long_text}).json()["count"]
        self.assertGreater(n_long, 64)
        check_error(self, post(port, "/v1/completions", completion_body(prompt=long_text)), 400)
        check_error(self, post(port, "/v1/completions", completion_body(prompt=long_text, max_tokens=None)), 400)
        check_error(self, post(port, "/v1/chat/completions",
                               chat_body(messages=[{"role": "user", "content": long_text}])), 400)
        check_error(self, post(port, "/v1/chat/completions",
                               chat_body(messages=[{"role": "user", "content": long_text}], max_tokens=None)), 400)
        s = stream(port, "/v1/chat/completions", chat_body(messages=[{"role": "user", "content": long_text}], stream=True))
        self.assertEqual(s.status, 400, "a streamed request over the context fails before the stream starts")
        # short prompt, too many tokens asked
        check_error(self, post(port, "/v1/completions", completion_body(prompt="hi", max_tokens=100)), 400, None)
        check_error(self, post(port, "/v1/chat/completions", chat_body(max_tokens=100)), 400, None)
        check_error(self, post(port, "/v1/chat/completions", chat_body(max_tokens=None, max_completion_tokens=100)), 400)
        # exact boundaries with token-id prompts
        check_error(self, post(port, "/v1/completions", completion_body(prompt=[5] * 64, max_tokens=None)), 400)
        check_error(self, post(port, "/v1/completions", completion_body(prompt=[5] * 64, max_tokens=1)), 400)
        check_error(self, post(port, "/v1/completions", completion_body(prompt=[5] * 63, max_tokens=2)), 400)
        check_error(self, post(port, "/v1/completions", completion_body(prompt=[[5], [5] * 64], max_tokens=1)), 400)
        r = post(port, "/v1/completions", completion_body(prompt=[5] * 63, max_tokens=1, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["usage"]["completion_tokens"], 1)
        r = post(port, "/v1/completions", completion_body(prompt=[5] * 60, max_tokens=None, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["usage"]["completion_tokens"], 4, "the default max_tokens is what room is left")
        # chat: exactly prompt + max_tokens == 64 is fine, one more is not
        msgs = [{"role": "user", "content": "hello"}]
        n = post(port, "/tokenize", {"messages": msgs}).json()["count"]
        r = post(port, "/v1/chat/completions", chat_body(messages=msgs, max_tokens=64 - n, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["usage"]["completion_tokens"], 64 - n)
        check_error(self, post(port, "/v1/chat/completions", chat_body(messages=msgs, max_tokens=65 - n)), 400)
        # still healthy
        self.assertEqual(post(port, "/v1/completions", completion_body(prompt="hi", max_tokens=2)).status, 200)
        self.assertEqual(metrics(port)['kimi:http_responses_total{code="5xx"}'], 0)


class T3DeepNesting(unittest.TestCase):
    """Deeply nested JSON (100000 levels, a 200 KB body) anywhere in a body: a 4xx or a 200,
    never a crash. A fresh server for each case that kills one."""

    DEPTH = 100000

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()

    def cases(self):
        arr = b"[" * self.DEPTH + b"]" * self.DEPTH
        obj = b'{"a":' * self.DEPTH + b"1" + b"}" * self.DEPTH
        msg = b'[{"role":"user","content":"hi"}]'
        return [
            ("/tokenize", b'{"messages":' + arr + b"}"),
            ("/tokenize", b'{"messages":' + msg + b',"user":' + arr + b"}"),
            ("/tokenize", b'{"prompt":"hi","model":' + arr + b"}"),
            ("/tokenize", b'{"prompt":"hi","user":' + obj + b"}"),
            ("/tokenize", arr),
            ("/detokenize", b'{"tokens":' + arr + b"}"),
            ("/v1/chat/completions", b'{"messages":' + arr + b"}"),
            ("/v1/chat/completions", b'{"messages":' + msg + b',"max_tokens":1,"user":' + arr + b"}"),
            ("/v1/chat/completions", b'{"messages":[{"role":"user","content":' + arr + b"}]}"),
            ("/v1/chat/completions", b'{"messages":' + msg + b',"max_tokens":1,"tools":[{"type":"function",'
                                     b'"function":{"name":"f","parameters":' + arr + b"}}]}"),
            ("/v1/chat/completions", b'{"messages":' + msg + b',"model":' + arr + b"}"),
            ("/v1/chat/completions", b'{"messages":' + msg + b',"stop":' + arr + b"}"),
            ("/v1/completions", b'{"prompt":' + arr + b"}"),
            ("/v1/completions", b'{"prompt":"hi","max_tokens":1,"user":' + obj + b"}"),
            ("/v1/completions", b'{"prompt":"hi","temperature":' + arr + b"}"),
            ("/v1/completions", b'{"prompt":"hi","logit_bias":{"1":' + arr + b"}}"),
            ("/v1/completions", b'{"prompt":"hi","max_tokens":1,"user":' + b"[" * self.DEPTH + b"}"),
        ]

    def test_deep_nesting(self):
        for path, body in self.cases():
            what = "%s %r...(%d bytes)" % (path, body[:70], len(body))
            with self.subTest(case=what):
                try:
                    r = post(self.srv.port, path, body, timeout=60)
                except (OSError, http.client.HTTPException) as e:
                    r = e
                died = self.srv.wait(1.0) if not isinstance(r, Resp) else None
                if not self.srv.alive():
                    rc = self.srv.proc.poll()
                    self.__class__.srv = Server()      # for the next case
                    self.fail("the server died (rc %s) on %s" % (rc, what))
                self.assertIsInstance(r, Resp, "no HTTP response for %s: %r (died: %r)" % (what, r, died))
                self.assertIn(r.status, (200, 400, 404), what)
                if r.status != 200:
                    check_error(self, r, r.status, None, what)


def post_raw(port, path, head_extra, body_chunks, timeout=60.0):
    """Sends a request whose body goes out on a thread while the response is read here (a server
    may answer before it has read everything). Returns (status, body) or (None, error)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    send_err = []

    def sender():
        try:
            for c in body_chunks:
                s.sendall(c)
        except OSError as e:
            send_err.append(e)

    try:
        s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                  head_extra + b"Connection: close\r\n\r\n")
        t = threading.Thread(target=sender, daemon=True)
        t.start()
        try:
            r = http.client.HTTPResponse(s)
            r.begin()
            data = r.read()
            status = r.status
            headers = {k.lower(): v for k, v in r.getheaders()}
        except (OSError, http.client.HTTPException) as e:
            t.join(timeout)
            return None, e, send_err
        t.join(timeout)
        return Resp(status, headers, data), None, send_err
    finally:
        s.close()


class T3BodyLimit(unittest.TestCase):
    """--max-body-mb 1: a 2 MB body -> 413 with the error JSON; a body under the limit is fine."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-body-mb", "1")

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()

    def _big_body(self, size):
        # valid and otherwise cheap: the padding is in "user", a field the server ignores
        return json.dumps(completion_body(prompt="hi", max_tokens=1, user="u" * size)).encode()

    def test_content_length_over_limit(self):
        for path in POST_ROUTES:
            with self.subTest(path=path):
                body = self._big_body(2 << 20)
                r, err, _ = post_raw(self.srv.port, path, b"Content-Length: %d\r\n" % len(body),
                                     [body[i:i + 65536] for i in range(0, len(body), 65536)])
                self.assertIsNone(err, "no response to an oversized body: %r" % err)
                check_error(self, r, 413, None, path)

    def test_chunked_over_limit(self):
        body = self._big_body(2 << 20)
        chunks = [b"%x\r\n" % len(body[i:i + 65536]) + body[i:i + 65536] + b"\r\n" for i in range(0, len(body), 65536)]
        r, err, _ = post_raw(self.srv.port, "/v1/completions", b"Transfer-Encoding: chunked\r\n", chunks + [b"0\r\n\r\n"])
        # 413, or the connection cut without an answer; never accepted
        if r is not None:
            check_error(self, r, 413, None, "chunked 2 MB body with --max-body-mb 1")

    def test_under_limit(self):
        r = post(self.srv.port, "/v1/completions", self._big_body(900 * 1024))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(get(self.srv.port, "/health").status, 200)


# ----------------------------------------------------------------------------------------------
# 4. Auth
# ----------------------------------------------------------------------------------------------

class T4Auth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--api-key", "secret")

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()

    PROTECTED = [("GET", "/v1/models", None), ("POST", "/v1/chat/completions", chat_body()),
                 ("POST", "/v1/completions", completion_body()), ("POST", "/tokenize", {"prompt": "hi"}),
                 ("POST", "/detokenize", {"tokens": [1, 2]})]

    def test_protected(self):
        port = self.srv.port
        for method, path, body in self.PROTECTED:
            for hdr in [None, "", "Bearer wrong", "secret", "Bearer secretx", "Bearer secre", "Basic c2VjcmV0",
                        "Bearer ", "Bearer"]:
                with self.subTest(path=path, auth=hdr):
                    h = {"Authorization": hdr} if hdr is not None else {}
                    r = request(port, method, path, body, headers=h)
                    check_error(self, r, 401, None, "%s %s auth=%r" % (method, path, hdr))
            with self.subTest(path=path, auth="right"):
                r = request(port, method, path, body, headers={"Authorization": "Bearer secret"})
                self.assertEqual(r.status, 200, r)
        # a streamed request without a key is refused before any SSE
        s = stream(port, "/v1/chat/completions", chat_body(stream=True))
        self.assertEqual(s.status, 401)
        s = stream(port, "/v1/chat/completions", chat_body(stream=True), headers={"Authorization": "Bearer secret"})
        self.assertEqual(s.status, 200)
        self.assertTrue(s.done)
        # unknown /v1 routes need the key too; with it they are 404
        check_error(self, get(port, "/v1/nope"), 401)
        check_error(self, get(port, "/v1/nope", headers={"Authorization": "Bearer secret"}), 404)

    def test_open_routes(self):
        port = self.srv.port
        r = get(port, "/health")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"status": "ok"})
        r = get(port, "/metrics")
        self.assertEqual(r.status, 200, r)
        parse_prometheus(r.body.decode())
        r = get(port, "/version")
        self.assertEqual(r.status, 200, r)
        # the curl example in the banner mentions the key header
        self.assertIn("Authorization: Bearer", self.srv.stdout_text())
