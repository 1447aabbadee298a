"""HTTP tests, part 5: fuzzing.

Seeded random and mutated bodies on every POST endpoint, and malformed HTTP on a raw socket: never
a 5xx, always well-formed HTTP, the server alive and serving afterwards. KIMI_FUZZ_SEED and
KIMI_FUZZ_ITERATIONS (environment) replay or widen the body loop. Run through http_test.py.
"""
import http.client
import json
import os
import random
import re
import socket
import sys
import time
import unittest

import http_common as hc
from http_common import (POST_ROUTES, SERVED, Resp, Server, chat_body, check_error, completion_body, get, idle,
                         metrics, post, stream, wait_metrics)

setUpModule = hc.setup_shared      # the model and the shared server: once, for all the modules


# ----------------------------------------------------------------------------------------------
# 5. Fuzz
# ----------------------------------------------------------------------------------------------

FUZZ_TEMPLATES = [
    ("/v1/chat/completions", {"model": SERVED, "messages": [{"role": "system", "content": "Be brief."},
                                                           {"role": "user", "content": "Hi there"}],
                              "max_tokens": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "stop": ["\n\n"],
                              "seed": 3, "logprobs": True, "top_logprobs": 2}),
    ("/v1/chat/completions", {"model": SERVED, "messages": [{"role": "user", "content": "weather?"}], "max_tokens": 4,
                              "tools": [{"type": "function", "function": {"name": "get_weather",
                                                                          "parameters": {"type": "object"}}}],
                              "tool_choice": "auto", "stream": True, "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": "hey"}]},
                                           {"role": "assistant", "content": "yo"},
                                           {"role": "user", "content": "again"}],
                              "max_completion_tokens": 3, "n": 2, "logit_bias": {"5": 3}, "min_p": 0.1}),
    ("/v1/completions", {"model": SERVED, "prompt": "Once upon", "max_tokens": 4, "temperature": 1.0, "logprobs": 2,
                         "echo": False, "presence_penalty": 0.5, "frequency_penalty": 0.5}),
    ("/v1/completions", {"prompt": [1, 2, 3, 4], "max_tokens": 3, "stream": True, "repetition_penalty": 1.2,
                         "stop_token_ids": [7], "ignore_eos": True}),
    ("/v1/completions", {"prompt": ["a b", "c d"], "max_tokens": 2, "echo": True, "seed": 11}),
    ("/tokenize", {"prompt": "hello world"}),
    ("/tokenize", {"model": SERVED, "messages": [{"role": "user", "content": "hi"}]}),
    ("/detokenize", {"tokens": [1, 2, 3, 300]}),
]

FUZZ_KEYS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
             "min_p", "n", "stop", "stop_token_ids", "seed", "presence_penalty", "frequency_penalty",
             "repetition_penalty", "logit_bias", "logprobs", "top_logprobs", "ignore_eos", "echo", "stream",
             "stream_options", "response_format", "tools", "tool_choice", "suffix", "prompt_logprobs", "guided_json",
             "best_of", "user", "tokens", "role", "content", "include_usage", "add_generation_prompt",
             "continue_final_message", "skip_special_tokens", "chat_template", "functions"]

FUZZ_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e99999", b"-1e99999", b"99999999999999999999999999",
               b"-9223372036854775809", b"18446744073709551616", b"0.0000000000000000000001", b"\x00", b"\xff",
               b"\xc3", b"\xed\xa0\x80", b"\\u0000", b"\\ud800", b"\\udfff\\ud800", b'"', b"\\", b",", b":", b"}", b"]",
               b"{", b"[", b"null", b"true", b"1", b"-1", b"0", b"1.5", b'""', b"[]", b"{}", b"\r\n", b" " * 100,
               b"\xef\xbb\xbf", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x7f"]


def fuzz_value(rng, depth=0):
    k = rng.randrange(22)
    if k == 0:
        return None
    if k == 1:
        return rng.choice([True, False])
    if k == 2:
        return rng.choice([0, 1, 2, 3, -1, -2, 20, 21, 100, 128, 129, 1000, 2 ** 31, 2 ** 31 - 1, 2 ** 32 + 1,
                           2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, -2 ** 63, 10 ** 30, -10 ** 30])
    if k == 3:
        return rng.choice([0.0, -0.0, 0.5, 1.5, 2.0, 2.0000001, -1e-300, 1e308, -1e308, 5e-324, 1e-7, 99.5, 100.0,
                           100.01])
    if k == 4:
        return rng.choice(["", "x", "kimi-tiny", "text", "auto", "none", "required", "function", "user", "assistant",
                           "system", "tool", "\u0000", "\ufffd", "\U0001F600", "<|im_end|>", "<|im_start|>",
                           "<|tool_calls_section_begin|>", "[BOS]", "\n" * 50, "a" * 5000, "%s%n%x", "' OR 1=1"])
    if k == 5:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 40)))
    if k == 6 and depth < 3:
        return [fuzz_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if k == 7 and depth < 3:
        return {rng.choice(FUZZ_KEYS): fuzz_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}
    if k == 8:
        return [rng.randrange(-5, 2000) for _ in range(rng.randrange(0, 8))]
    if k == 9:
        return {str(rng.randrange(-5, 2000)): rng.choice([0, 1, -100, 100, 101, 1e9, "x"]) for _ in range(3)}
    if k == 10:
        d = rng.randrange(1, 300)
        v = 1
        for _ in range(d):
            v = [v] if rng.random() < 0.5 else {"a": v}
        return v
    if k == 11:
        return [{"role": rng.choice(["user", "assistant", "system", "tool", "developer", "x", 5, None]),
                 "content": fuzz_value(rng, depth + 1)} for _ in range(rng.randrange(0, 4))]
    if k == 12:
        return [{"type": rng.choice(["function", "x"]),
                 "function": rng.choice([{"name": "f"}, {"name": 5}, {}, "f", {"name": "f", "parameters": 5}])}]
    if k == 13:
        return {"type": rng.choice(["text", "json_object", "json_schema", 5])}
    if k == 14:
        return {"include_usage": fuzz_value(rng, depth + 1), "continuous_usage_stats": rng.choice([True, False, 1])}
    return rng.choice([1, 4, 0.3, "hi", True, [1, 2], {"x": 1}])


def fuzz_containers(obj, out):
    if isinstance(obj, dict):
        out.append(obj)
        for v in obj.values():
            fuzz_containers(v, out)
    elif isinstance(obj, list):
        out.append(obj)
        for v in obj:
            fuzz_containers(v, out)
    return out


def mutate_structure(rng, body):
    body = json.loads(json.dumps(body))
    for _ in range(rng.randrange(1, 4)):
        conts = fuzz_containers(body, [])
        c = rng.choice(conts)
        op = rng.randrange(4)
        if isinstance(c, dict):
            if op == 0 and c:
                del c[rng.choice(list(c))]
            elif op == 1 and c:
                c[rng.choice(list(c))] = fuzz_value(rng)
            else:
                c[rng.choice(FUZZ_KEYS)] = fuzz_value(rng)
        else:
            if op == 0 and c:
                del c[rng.randrange(len(c))]
            elif op == 1 and c:
                c[rng.randrange(len(c))] = fuzz_value(rng)
            elif op == 2 and c:
                c.append(c[rng.randrange(len(c))])
            else:
                c.insert(rng.randrange(len(c) + 1), fuzz_value(rng))
    return body


def mutate_bytes(rng, data):
    data = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        if not data:
            data += rng.choice(FUZZ_TOKENS)
            continue
        op = rng.randrange(6)
        i = rng.randrange(len(data))
        if op == 0:
            del data[i:i + rng.randrange(1, 10)]
        elif op == 1:
            j = min(len(data), i + rng.randrange(1, 20))
            data[i:i] = data[i:j] * rng.randrange(1, 4)
        elif op == 2:
            data[i] = rng.randrange(256)
        elif op == 3:
            data[i:i] = rng.choice(FUZZ_TOKENS)
        elif op == 4:
            # replace a value after a colon with a token
            k = data.find(b":", i)
            if k >= 0:
                e = k + 1
                while e < len(data) and data[e] not in b",}]":
                    e += 1
                data[k + 1:e] = rng.choice(FUZZ_TOKENS)
        else:
            del data[i:]
    return bytes(data)


def fuzz_case(rng):
    """(path, body bytes) — a mutated valid body, or something stranger."""
    path, tmpl = rng.choice(FUZZ_TEMPLATES)
    if rng.random() < 0.15:
        path = rng.choice(POST_ROUTES)       # a body meant for another endpoint
    k = rng.random()
    if k < 0.40:
        body = json.dumps(mutate_structure(rng, tmpl)).encode()
    elif k < 0.75:
        body = mutate_bytes(rng, json.dumps(tmpl, ensure_ascii=rng.random() < 0.5).encode())
    elif k < 0.85:
        body = mutate_bytes(rng, json.dumps(mutate_structure(rng, tmpl)).encode())
    elif k < 0.90:
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
    elif k < 0.95:
        d = rng.choice([1000, 10000, 100000])
        opener = rng.choice([b"[", b'{"a":', b'{"prompt":['])
        body = opener * d + (b"]" * d if rng.random() < 0.5 else b"")
        if opener != b"[":
            body = rng.choice([body, b'{"messages":' + b"[" * d + b"]" * d + b"}"])
    else:
        key = rng.choice(["prompt", "messages", "tokens", "stop", "logit_bias", "max_tokens", "model"])
        b = dict(tmpl)
        b[key] = fuzz_value(rng)
        body = json.dumps(b).encode()
    return path, body


class T5Fuzz(unittest.TestCase):
    ITERATIONS = int(os.environ.get("KIMI_FUZZ_ITERATIONS", "400"))
    SEED = int(os.environ.get("KIMI_FUZZ_SEED", "20240601"))     # set to replay or explore

    def setUp(self):
        # a server per test (a crash found by one does not hide the other's findings); a short
        # context keeps any request that stays valid small (no max_tokens -> the room left)
        self.srv = Server("--max-model-len", "96")

    def tearDown(self):
        self.srv.kill()

    def _check_response(self, path, body, r):
        what = "%s %r" % (path, body[:300])
        self.assertLess(r.status, 500, "5xx for %s: %r" % (what, r))
        self.assertGreaterEqual(r.status, 200, what)
        if r.status != 200:
            check_error(self, r, r.status, None, what)
            return
        ct = r.headers.get("content-type", "")
        if ct.startswith("text/event-stream"):
            text = r.body.decode("utf-8")
            self.assertTrue(text.endswith("data: [DONE]\n\n"), "%s: stream not ending in [DONE]: %r" % (what, text[-300:]))
            for ev in text.split("\n\n")[:-1]:
                self.assertTrue(ev.startswith("data: ") or ev.startswith(":"), "%s: bad SSE event %r" % (what, ev))
                if ev.startswith("data: ") and ev != "data: [DONE]":
                    j = json.loads(ev[6:])
                    self.assertTrue("choices" in j or "error" in j, ev)
        else:
            self.assertTrue(ct.startswith("application/json"), what)
            j = r.json()
            if path in ("/v1/chat/completions", "/v1/completions"):
                self.assertIsInstance(j.get("choices"), list, what)
                self.assertTrue(j["choices"], what)
            elif path == "/tokenize":
                self.assertEqual(j["count"], len(j["tokens"]), what)
            else:
                self.assertIsInstance(j["prompt"], str, what)

    def test_fuzz_bodies(self):
        # every failure is collected (a dead server is restarted) so that one run shows them all
        rng = random.Random(self.SEED)
        counts, failures = {}, []
        t0 = time.monotonic()
        for it in range(self.ITERATIONS):
            path, body = fuzz_case(rng)
            hdrs = {}
            if rng.random() < 0.1:
                hdrs["Content-Type"] = rng.choice(["text/plain", "application/x-www-form-urlencoded", "",
                                                   "application/json; charset=latin1"])
            what = "iteration %d: POST %s %r... (%d bytes)" % (it, path, body[:120], len(body))
            try:
                r = post(self.srv.port, path, body, headers=hdrs, timeout=120)
            except (OSError, http.client.HTTPException) as e:
                r = e
            if isinstance(r, Resp):
                counts[r.status] = counts.get(r.status, 0) + 1
                try:
                    self._check_response(path, body, r)
                except AssertionError as e:
                    failures.append("%s: %s" % (what, str(e)[:500]))
            if not self.srv.alive() or self.srv.wait(0.05 if not isinstance(r, Resp) else 0) is not None:
                failures.append("%s: the server died (rc %s)" % (what, self.srv.proc.poll()))
                self.srv.kill()
                self.srv = Server("--max-model-len", "96")
            elif not isinstance(r, Resp):
                failures.append("%s: no well-formed HTTP response: %r" % (what, r))
        sys.stderr.write("\nfuzz: seed %d, %d requests in %.1f s, statuses %s, %d failures\n" %
                         (self.SEED, self.ITERATIONS, time.monotonic() - t0, dict(sorted(counts.items())), len(failures)))
        self._still_serving()
        self.assertFalse(failures, "%d fuzz failures:\n  %s" % (len(failures), "\n  ".join(failures[:15])))
        self.assertGreater(counts.get(200, 0), 10, "the fuzzer should keep some requests valid: %r" % counts)
        self.assertGreater(counts.get(400, 0), 10, counts)

    RAW_HTTP = [
        b"GARBAGE\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET /health\r\n\r\n",
        b"GET /health HTTP/9.9\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
        b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 100000 + b"\r\n\r\n",
        b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /health HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(500)) + b"\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
        b"GET /%00%ff/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /health?%zz=%%% HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\": \"hi\"}",  # short body, then EOF
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(32)),   # a TLS ClientHello
        b"\r\n\r\n\r\n",
        b"",
    ]

    def test_fuzz_raw_http(self):
        port = self.srv.port
        for i, raw in enumerate(self.RAW_HTTP):
            with self.subTest(i=i, raw=raw[:60]):
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
                try:
                    try:
                        s.sendall(raw)
                        s.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass          # the server may close early on a request it cannot parse
                    data = b""
                    while True:
                        try:
                            chunk = s.recv(65536)
                        except ConnectionResetError:
                            break
                        if not chunk:
                            break
                        data += chunk
                finally:
                    s.close()
                if data:
                    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", data)
                    self.assertTrue(m, "not an HTTP response: %r" % data[:200])
                    self.assertLess(int(m.group(1)), 500, data[:300])
                self.assertTrue(self.srv.alive(), "server died on raw request %d" % i)
        self._still_serving()

    def _still_serving(self):
        port = self.srv.port
        r = get(port, "/health")
        self.assertEqual(r.status, 200, r)
        r = post(port, "/v1/chat/completions", chat_body(max_tokens=4, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        s = stream(port, "/v1/completions", completion_body(max_tokens=4, ignore_eos=True, stream=True))
        self.assertTrue(s.done)
        m = metrics(port)
        self.assertEqual(m['kimi:http_responses_total{code="5xx"}'], 0)
        m = wait_metrics(port, idle, timeout=10)
        self.assertEqual(m["kimi:num_requests_running"], 0)
        self.assertEqual(m["kimi:cache_blocks_used"], 0)
        self.assertEqual(m["kimi:state_slots_used"], 0)
