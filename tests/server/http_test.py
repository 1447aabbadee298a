#!/usr/bin/python3
"""End-to-end HTTP tests of `kimi-cpp serve` on a random tiny model (standard library only).

    /usr/bin/python3 tests/server/http_test.py --kimi /abs/path/kimi-cpp [unittest args]

What is checked (one shared server for most tests; extra servers where flags differ):
  1. shapes    /health, /version, /v1/models, /, /tokenize <-> /detokenize, /metrics (parsed as
               Prometheus text; counters move by exactly what the requests report)
  2. generate  chat + completions, stream and not, with plain http.client: strict SSE framing,
               usage chunk, [DONE] last, stream text == non-stream text (greedy), n > 1,
               finish_reason length / stop, system_fingerprint
  3. bad input every invalid request -> its 4xx with OpenAI's error JSON; context limits on a
               --max-model-len 64 server; 413 on a --max-body-mb 1 server; unknown routes; no
               harm afterwards (and no 5xx ever)
  4. auth      --api-key: 401 without/with a wrong key, 200 with it; /health, /metrics, /version open
  5. fuzz      seeded random + mutated bodies on every POST endpoint, malformed HTTP: never a
               5xx, always well-formed HTTP, the server alive and serving afterwards
  6. disconnect a client leaving mid-stream frees its running slot, cache blocks and state slots,
               and is counted as an abort
  7. shutdown  SIGTERM idle -> exit 0; SIGINT with a stream in flight -> it completes, exit 0;
               --shutdown-grace 0.5 with a long stream -> aborted, exit 0; /health 503 while loading
Exits non-zero on any failure. Every server started is killed at the end (also on failure).
"""
import argparse
import http.client
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

KIMI = None            # path of kimi-cpp (--kimi)
MODEL_DIR = None       # the random tiny model, made once
SERVED = "kimi-tiny"
VOCAB = None           # the model's vocab_size (from config.json)
MAIN = None            # the shared server (--max-model-len 4096)
_SERVERS = []          # every server started, killed at exit
_TMPDIRS = []

READY_RE = re.compile(r"kimi\.cpp (\S+) serving '([^']*)' at http://127\.0\.0\.1:(\d+)")
LISTEN_RE = re.compile(r"serve: listening on http://127\.0\.0\.1:(\d+)")


# ----------------------------------------------------------------------------------------------
# Servers
# ----------------------------------------------------------------------------------------------

class Server:
    """One `kimi-cpp serve` process on --port 0; stdout/stderr collected by reader threads."""

    def __init__(self, *extra, model=None, wait_ready=True, timeout=60.0):
        self.args = [KIMI, "serve", "--model", model or MODEL_DIR, "--port", "0", "--served-model-name", SERVED,
                     "--threads", "2", *extra]
        self.out, self.err = [], []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        _SERVERS.append(self)
        self.readers = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
                        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True)]
        for t in self.readers:
            t.start()
        self.port = None
        self.version = None
        m = self.wait_line(self.err, LISTEN_RE, timeout)
        self.port = int(m.group(1))
        if wait_ready:
            self.wait_ready(timeout)

    def _pump(self, f, lines):
        for raw in iter(f.readline, b""):
            with self.cond:
                lines.append(raw.decode("utf-8", "replace"))
                self.cond.notify_all()
        with self.cond:
            lines.append(None)        # EOF marker
            self.cond.notify_all()

    def wait_line(self, lines, regex, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for ln in lines:
                    if ln is not None:
                        m = regex.search(ln)
                        if m:
                            return m
                if lines and lines[-1] is None:
                    raise AssertionError("server exited (rc %r) before printing %r\n%s" %
                                         (self.proc.poll(), regex.pattern, self.log()))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("server did not print %r within %.0f s\n%s" % (regex.pattern, timeout, self.log()))
                self.cond.wait(min(left, 0.5))

    def wait_ready(self, timeout=60.0):
        m = self.wait_line(self.out, READY_RE, timeout)
        self.version = m.group(1)
        assert m.group(2) == SERVED, m.group(0)
        assert int(m.group(3)) == self.port, "ready line port %s != listening port %d" % (m.group(3), self.port)

    def stdout_text(self):
        with self.cond:
            return "".join(ln for ln in self.out if ln is not None)

    def log(self):
        with self.cond:
            return ("--- server stdout ---\n" + "".join(ln for ln in self.out if ln is not None) +
                    "--- server stderr ---\n" + "".join(ln for ln in self.err if ln is not None))[-6000:]

    def alive(self):
        return self.proc.poll() is None

    def send(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def wait(self, timeout):
        """Exit code, or None if still running after timeout seconds."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        self.send(sig)
        rc = self.wait(timeout)
        if rc is None:
            self.kill()
        return rc

    def kill(self):
        if self.alive():
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        for t in self.readers:
            t.join(2)


def kill_all():
    for s in _SERVERS:
        try:
            s.kill()
        except Exception:
            pass


def make_model(seed=1):
    d = tempfile.mkdtemp(prefix="kimi-http-test-")
    _TMPDIRS.append(d)
    out = os.path.join(d, "model")
    subprocess.run([KIMI, "make-model", "--preset", "tiny", "--seed", str(seed), "--out", out], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    return out


# ----------------------------------------------------------------------------------------------
# HTTP
# ----------------------------------------------------------------------------------------------

class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers      # lower-case names
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "HTTP %d %r" % (self.status, self.body[:400])


def request(port, method, path, body=None, headers=None, timeout=120.0):
    """One request on a fresh connection. body: dict/list (JSON-encoded), str or bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode("utf-8")
        if body is not None:
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def get(port, path, **kw):
    return request(port, "GET", path, **kw)


def post(port, path, body, **kw):
    return request(port, "POST", path, body, **kw)


class SSE:
    """A streamed response read with strict framing: every event is `data: ...` or a `: comment`
    line followed by one blank line; [DONE] is the last event and the body ends right after it."""

    def __init__(self):
        self.status = None
        self.headers = {}
        self.events = []        # parsed JSON of each data event before [DONE]
        self.comments = 0
        self.done = False
        self.raw_error = None   # body when the status is not 200


def open_stream(port, path, body, headers=None, timeout=120.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    conn.request("POST", path, body=json.dumps(body).encode(), headers=hdrs)
    return conn, conn.getresponse()


def sse_events(resp):
    """Yields ('data', text) / ('comment', text) from a streaming response, checking the framing."""
    while True:
        line = resp.readline()
        if line == b"":
            return
        if not line.endswith(b"\n"):
            raise AssertionError("SSE line without a newline at the end of the body: %r" % line)
        text = line[:-1].decode("utf-8")
        if text.startswith("data: "):
            kind, payload = "data", text[6:]
        elif text.startswith(":"):
            kind, payload = "comment", text[1:].strip()
        else:
            raise AssertionError("unexpected SSE line %r" % line)
        blank = resp.readline()
        if blank != b"\n":
            raise AssertionError("SSE event %r not followed by a blank line but by %r" % (line, blank))
        yield kind, payload


def stream(port, path, body, headers=None, timeout=120.0):
    s = SSE()
    conn, r = open_stream(port, path, body, headers, timeout)
    try:
        s.status = r.status
        s.headers = {k.lower(): v for k, v in r.getheaders()}
        if r.status != 200:
            s.raw_error = r.read()
            return s
        for kind, payload in sse_events(r):
            if s.done:
                raise AssertionError("SSE event after [DONE]: %r" % payload)
            if kind == "comment":
                s.comments += 1
            elif payload == "[DONE]":
                s.done = True
            else:
                s.events.append(json.loads(payload))
        return s
    finally:
        r.close()
        conn.close()


# ----------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_prometheus(text):
    """{'name{labels}': value} for every sample; raises on any malformed line."""
    samples, types = {}, {}
    for ln in text.split("\n"):
        if ln == "":
            continue
        if ln.startswith("#"):
            parts = ln.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if parts[1] == "TYPE":
                    if len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                        raise AssertionError("bad TYPE line %r" % ln)
                    if parts[2] in types:
                        raise AssertionError("metric %s typed twice" % parts[2])
                    types[parts[2]] = parts[3]
            continue
        m = SAMPLE_RE.match(ln)
        if not m:
            raise AssertionError("not a Prometheus sample line: %r" % ln)
        name, labels, value = m.group(1), m.group(3), m.group(4)
        if labels:
            pos = 0
            while pos < len(labels):
                lm = LABEL_RE.match(labels, pos)
                if not lm or lm.end() == pos:
                    raise AssertionError("bad labels in %r" % ln)
                pos = lm.end()
        if value not in ("+Inf", "-Inf", "NaN"):
            float(value)            # raises if malformed
        base = re.sub(r"_(bucket|sum|count|total)$", "", name)
        if name not in types and base not in types and re.sub(r"_(bucket|sum|count)$", "", name) not in types:
            raise AssertionError("sample %r has no # TYPE line before it" % ln)
        key = name + ("{" + labels + "}" if labels else "")
        if key in samples:
            raise AssertionError("duplicate sample %r" % key)
        samples[key] = float(value)
    return samples, types


def metrics(port):
    r = get(port, "/metrics")
    assert r.status == 200, r
    return parse_prometheus(r.body.decode("utf-8"))[0]


def wait_metrics(port, pred, timeout=10.0):
    """The metrics once pred(metrics) holds, or the last ones after timeout seconds."""
    deadline = time.monotonic() + timeout
    m = metrics(port)
    while not pred(m) and time.monotonic() < deadline:
        time.sleep(0.05)
        m = metrics(port)
    return m


def idle(m):
    return (m["kimi:num_requests_running"] == 0 and m["kimi:num_requests_waiting"] == 0 and
            m["kimi:cache_blocks_used"] == 0 and m["kimi:state_slots_used"] == 0)


# ----------------------------------------------------------------------------------------------
# Request bodies and assertions
# ----------------------------------------------------------------------------------------------

def chat_body(**kw):
    b = {"model": SERVED, "messages": [{"role": "user", "content": "Say something."}], "max_tokens": 4}
    b.update(kw)
    return b


def completion_body(**kw):
    b = {"model": SERVED, "prompt": "Once upon a time", "max_tokens": 4}
    b.update(kw)
    return b


def check_error(tc, r, status, param=None, msg=""):
    """r is an HTTP error with OpenAI's error JSON: {"error": {message, type, param, code}}."""
    if isinstance(status, int):
        status = (status,)
    tc.assertIn(r.status, status, "%s: %r" % (msg, r))
    tc.assertTrue(r.headers.get("content-type", "").startswith("application/json"), "%s: %r" % (msg, r.headers))
    j = json.loads(r.body.decode("utf-8"))
    tc.assertIsInstance(j, dict, msg)
    tc.assertIn("error", j, msg)
    e = j["error"]
    tc.assertIsInstance(e, dict, msg)
    tc.assertIsInstance(e.get("message"), str, "%s: %r" % (msg, j))
    tc.assertTrue(e["message"], "%s: empty message %r" % (msg, j))
    tc.assertIsInstance(e.get("type"), str, "%s: %r" % (msg, j))
    tc.assertTrue(e["type"], "%s: empty type %r" % (msg, j))
    tc.assertIn("param", e, msg)
    tc.assertIn("code", e, msg)
    tc.assertTrue(e["param"] is None or isinstance(e["param"], str), "%s: %r" % (msg, j))
    tc.assertTrue(e["code"] is None or isinstance(e["code"], str), "%s: %r" % (msg, j))
    if r.status == 400:
        tc.assertEqual(e["type"], "invalid_request_error", "%s: %r" % (msg, j))
    if param is not None:
        tc.assertEqual(e["param"], param, "%s: %r" % (msg, j))
    return e


def check_usage(tc, u, prompt=None, completion=None):
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        tc.assertIsInstance(u[k], int, u)
    tc.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"], u)
    if prompt is not None:
        tc.assertEqual(u["prompt_tokens"], prompt, u)
    if completion is not None:
        tc.assertEqual(u["completion_tokens"], completion, u)


def check_envelope(tc, j, obj, id_prefix):
    tc.assertEqual(j["object"], obj, j)
    tc.assertIsInstance(j["id"], str)
    tc.assertTrue(j["id"].startswith(id_prefix), j["id"])
    tc.assertIsInstance(j["created"], int)
    tc.assertLessEqual(abs(j["created"] - time.time()), 3600 * 24, j["created"])
    tc.assertEqual(j["model"], SERVED)
    tc.assertIsInstance(j.get("system_fingerprint"), str, j)
    tc.assertTrue(j["system_fingerprint"], j)


def stream_text(tc, s, chat):
    """The concatenated text of choice 0 of a stream, and its last finish_reason."""
    parts, finish = [], None
    for ev in s.events:
        for ch in ev["choices"]:
            tc.assertEqual(ch["index"], 0, ev)
            if chat:
                c = ch["delta"].get("content")
                if c is not None:
                    parts.append(c)
            else:
                parts.append(ch["text"])
            if ch.get("finish_reason") is not None:
                tc.assertIsNone(finish, "two chunks with a finish_reason: %r" % ev)
                finish = ch["finish_reason"]
    return "".join(parts), finish


# ----------------------------------------------------------------------------------------------
# 1. Shapes and metrics
# ----------------------------------------------------------------------------------------------

class T1Shapes(unittest.TestCase):
    def test_health(self):
        r = get(MAIN.port, "/health")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("application/json"))
        self.assertEqual(r.json(), {"status": "ok"})

    def test_version(self):
        r = get(MAIN.port, "/version")
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(j["name"], "kimi.cpp")
        self.assertRegex(j["version"], r"^\d+\.\d+\.\d+")
        self.assertEqual(j["version"], MAIN.version, "the version in /version and in the ready line")

    def test_models(self):
        r = get(MAIN.port, "/v1/models")
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(j["object"], "list")
        self.assertEqual(len(j["data"]), 1, j)
        card = j["data"][0]
        self.assertEqual(card["id"], SERVED)
        self.assertEqual(card["object"], "model")
        self.assertIsInstance(card["created"], int)
        self.assertIsInstance(card["owned_by"], str)
        self.assertEqual(card["root"], MODEL_DIR)
        self.assertEqual(card["max_model_len"], 4096)

    def test_index_page(self):
        r = get(MAIN.port, "/")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("text/html"), r.headers)
        page = r.body.decode("utf-8")
        self.assertIn("<html", page.lower())
        self.assertIn("kimi.cpp", page)
        self.assertIn("/v1/chat/completions", page)

    def test_tokenize_detokenize_round_trip(self):
        for text in ["Hello, world!", "héllo wörld 你好 🙂", "a  b\n\tc", "x" * 300]:
            with self.subTest(text=text[:20]):
                r = post(MAIN.port, "/tokenize", {"prompt": text})
                self.assertEqual(r.status, 200, r)
                j = r.json()
                self.assertEqual(j["count"], len(j["tokens"]), j)
                self.assertEqual(j["max_model_len"], 4096)
                self.assertIn("token_strs", j)
                self.assertGreater(j["count"], 0)
                for t in j["tokens"]:
                    self.assertIsInstance(t, int)
                    self.assertTrue(0 <= t < VOCAB, t)
                r = post(MAIN.port, "/detokenize", {"tokens": j["tokens"]})
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json(), {"prompt": text})
        # with the model name, and the chat form: the template adds tokens around the content
        r = post(MAIN.port, "/tokenize", {"model": SERVED, "prompt": "hi"})
        self.assertEqual(r.status, 200, r)
        plain = r.json()["count"]
        r = post(MAIN.port, "/tokenize", {"model": SERVED, "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(r.status, 200, r)
        chat = r.json()
        self.assertEqual(chat["count"], len(chat["tokens"]))
        self.assertGreater(chat["count"], plain)
        # the chat prompt length is what a chat completion reports as prompt_tokens
        r = post(MAIN.port, "/v1/chat/completions", chat_body(messages=[{"role": "user", "content": "hi"}], max_tokens=1))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["usage"]["prompt_tokens"], chat["count"])
        r = post(MAIN.port, "/detokenize", {"tokens": []})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"prompt": ""})

    REQUIRED = ["kimi:prompt_tokens_total", "kimi:generation_tokens_total", "kimi:num_requests_running",
                "kimi:num_requests_waiting", "kimi:kv_cache_usage_perc", "kimi:cache_blocks_used",
                "kimi:cache_blocks_total", "kimi:state_slots_used", "kimi:state_slots_total",
                "kimi:attn_output_copies_total", "kimi:step_heap_allocations_total",
                'kimi:request_success_total{finished_reason="stop"}',
                'kimi:request_success_total{finished_reason="length"}',
                'kimi:request_success_total{finished_reason="abort"}',
                'kimi:http_responses_total{code="2xx"}', 'kimi:http_responses_total{code="4xx"}',
                'kimi:http_responses_total{code="5xx"}']
    HISTOGRAMS = ["kimi:time_to_first_token_seconds", "kimi:inter_token_latency_seconds",
                  "kimi:e2e_request_latency_seconds"]

    def test_metrics_format_and_counters(self):
        r = get(MAIN.port, "/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("text/plain"), r.headers)
        m0, types = parse_prometheus(r.body.decode("utf-8"))
        for name in self.REQUIRED:
            self.assertIn(name, m0)
        for h in self.HISTOGRAMS:
            self.assertEqual(types.get(h), "histogram", h)
            buckets = sorted(((float(re.search(r'le="([^"]+)"', k).group(1)), v) for k, v in m0.items()
                              if k.startswith(h + "_bucket{")), key=lambda x: x[0])
            self.assertGreater(len(buckets), 1, h)
            self.assertEqual(buckets[-1][0], math.inf, h)
            self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets), "%s buckets are not cumulative" % h)
            self.assertEqual(buckets[-1][1], m0[h + "_count"], h)
            self.assertIn(h + "_sum", m0)
        self.assertEqual(m0["kimi:ready"], 1)
        self.assertGreater(m0["kimi:cache_blocks_total"], 0)
        self.assertGreater(m0["kimi:state_slots_total"], 0)
        self.assertTrue(0 <= m0["kimi:kv_cache_usage_perc"] <= 1)

        # two requests of known sizes, one bad one: the counters move by exactly that
        a = post(MAIN.port, "/v1/chat/completions", chat_body(max_tokens=5, ignore_eos=True))
        b = post(MAIN.port, "/v1/completions", completion_body(max_tokens=7, ignore_eos=True))
        s = stream(MAIN.port, "/v1/completions", completion_body(max_tokens=3, ignore_eos=True, stream=True,
                                                                 stream_options={"include_usage": True}))
        bad = post(MAIN.port, "/v1/completions", completion_body(temperature=-1))
        self.assertEqual(a.status, 200, a)
        self.assertEqual(b.status, 200, b)
        self.assertEqual(s.status, 200)
        self.assertEqual(bad.status, 400)
        ua, ub, us = a.json()["usage"], b.json()["usage"], s.events[-1]["usage"]
        # the HTTP status counters are bumped once a response is written: give them a moment
        c4 = 'kimi:http_responses_total{code="4xx"}'
        m1 = wait_metrics(MAIN.port, lambda m: m[c4] > m0[c4], timeout=5)
        self.assertEqual(m1["kimi:prompt_tokens_total"] - m0["kimi:prompt_tokens_total"],
                         ua["prompt_tokens"] + ub["prompt_tokens"] + us["prompt_tokens"])
        self.assertEqual(m1["kimi:generation_tokens_total"] - m0["kimi:generation_tokens_total"], 5 + 7 + 3)
        ln = 'kimi:request_success_total{finished_reason="length"}'
        self.assertEqual(m1[ln] - m0[ln], 3)
        self.assertGreaterEqual(m1['kimi:http_responses_total{code="2xx"}'] - m0['kimi:http_responses_total{code="2xx"}'], 3)
        self.assertEqual(m1['kimi:http_responses_total{code="4xx"}'] - m0['kimi:http_responses_total{code="4xx"}'], 1)
        for h in ["kimi:time_to_first_token_seconds", "kimi:e2e_request_latency_seconds"]:
            self.assertEqual(m1[h + "_count"] - m0[h + "_count"], 3, h)
            self.assertGreater(m1[h + "_sum"], m0[h + "_sum"], h)
        self.assertEqual(m1["kimi:inter_token_latency_seconds_count"] - m0["kimi:inter_token_latency_seconds_count"],
                         4 + 6 + 2)
        self.assertGreater(m1["kimi:engine_steps_total"], m0["kimi:engine_steps_total"])
        # the engine gauges may lag the last token by a step
        m2 = wait_metrics(MAIN.port, idle, timeout=5)
        self.assertEqual(m2["kimi:num_requests_running"], 0)
        self.assertEqual(m2["kimi:num_requests_waiting"], 0)


# ----------------------------------------------------------------------------------------------
# 2. Generation
# ----------------------------------------------------------------------------------------------

class T2Generation(unittest.TestCase):
    def test_chat_non_stream(self):
        r = post(MAIN.port, "/v1/chat/completions", chat_body(max_tokens=8, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("application/json"))
        j = r.json()
        check_envelope(self, j, "chat.completion", "chatcmpl-")
        self.assertEqual(len(j["choices"]), 1)
        ch = j["choices"][0]
        self.assertEqual(ch["index"], 0)
        self.assertEqual(ch["message"]["role"], "assistant")
        self.assertIsInstance(ch["message"]["content"], str)
        self.assertEqual(ch["finish_reason"], "length")
        self.assertIn("logprobs", ch)
        check_usage(self, j["usage"], completion=8)

    def test_completion_non_stream(self):
        r = post(MAIN.port, "/v1/completions", completion_body(max_tokens=8, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        j = r.json()
        check_envelope(self, j, "text_completion", "cmpl-")
        self.assertEqual(len(j["choices"]), 1)
        ch = j["choices"][0]
        self.assertEqual(ch["index"], 0)
        self.assertIsInstance(ch["text"], str)
        self.assertEqual(ch["finish_reason"], "length")
        tok = post(MAIN.port, "/tokenize", {"prompt": "Once upon a time"}).json()
        check_usage(self, j["usage"], prompt=tok["count"], completion=8)

    def _stream_vs_plain(self, path, body, chat):
        plain = post(MAIN.port, path, body)
        self.assertEqual(plain.status, 200, plain)
        pj = plain.json()
        s = stream(MAIN.port, path, dict(body, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(s.status, 200, s.raw_error)
        self.assertTrue(s.headers["content-type"].startswith("text/event-stream"), s.headers)
        self.assertTrue(s.done, "no data: [DONE]")
        self.assertGreaterEqual(len(s.events), 2)
        obj, prefix = ("chat.completion.chunk", "chatcmpl-") if chat else ("text_completion", "cmpl-")
        ids = set()
        for ev in s.events:
            check_envelope(self, ev, obj, prefix)
            ids.add(ev["id"])
        self.assertEqual(len(ids), 1, "one id across the chunks of a stream")
        last = s.events[-1]
        self.assertEqual(last["choices"], [], "the usage chunk has no choices")
        check_usage(self, last["usage"], prompt=pj["usage"]["prompt_tokens"], completion=body["max_tokens"])
        for ev in s.events[:-1]:
            self.assertEqual(len(ev["choices"]), 1, ev)
            self.assertNotIn("usage", ev, "usage only in the final chunk without continuous_usage_stats")
        if chat:
            self.assertEqual(s.events[0]["choices"][0]["delta"].get("role"), "assistant", s.events[0])
            for ev in s.events[1:-1]:
                self.assertNotIn("role", ev["choices"][0]["delta"], ev)
        text, finish = stream_text(self, s, chat)
        self.assertEqual(finish, "length")
        self.assertIsNotNone(s.events[-2]["choices"][0]["finish_reason"], "finish_reason in the last choice chunk")
        want = pj["choices"][0]["message"]["content"] if chat else pj["choices"][0]["text"]
        self.assertEqual(text, want, "stream concatenation != non-stream text (greedy)")
        return text

    def test_chat_stream_equals_non_stream(self):
        t = self._stream_vs_plain("/v1/chat/completions", chat_body(max_tokens=24, temperature=0, ignore_eos=True), True)
        self.assertTrue(t)

    def test_completion_stream_equals_non_stream(self):
        t = self._stream_vs_plain("/v1/completions", completion_body(max_tokens=24, temperature=0, ignore_eos=True), False)
        self.assertTrue(t)

    def test_greedy_is_deterministic_and_seed_reproducible(self):
        b = completion_body(max_tokens=12, temperature=0, ignore_eos=True)
        t1 = post(MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        t2 = post(MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        self.assertEqual(t1, t2)
        b = completion_body(max_tokens=12, temperature=1.0, seed=1234, ignore_eos=True)
        s1 = post(MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        s2 = post(MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        self.assertEqual(s1, s2, "the same seed gives the same sample")

    def test_stream_without_usage(self):
        s = stream(MAIN.port, "/v1/chat/completions", chat_body(max_tokens=3, ignore_eos=True, stream=True))
        self.assertEqual(s.status, 200, s.raw_error)
        self.assertTrue(s.done)
        for ev in s.events:
            self.assertNotIn("usage", ev)
            self.assertEqual(len(ev["choices"]), 1)
        self.assertEqual(s.events[-1]["choices"][0]["finish_reason"], "length")

    def test_n_choices(self):
        r = post(MAIN.port, "/v1/completions", completion_body(max_tokens=3, n=3, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(sorted(c["index"] for c in j["choices"]), [0, 1, 2])
        for c in j["choices"]:
            self.assertEqual(c["finish_reason"], "length")
        check_usage(self, j["usage"], completion=9)
        s = stream(MAIN.port, "/v1/chat/completions", chat_body(max_tokens=3, n=2, ignore_eos=True, stream=True,
                                                                stream_options={"include_usage": True}))
        self.assertTrue(s.done)
        finishes = {}
        for ev in s.events[:-1]:
            for ch in ev["choices"]:
                if ch["finish_reason"] is not None:
                    finishes[ch["index"]] = ch["finish_reason"]
        self.assertEqual(finishes, {0: "length", 1: "length"})
        check_usage(self, s.events[-1]["usage"], completion=6)

    def test_stop_string(self):
        # the greedy text, then again with a stop string from its middle: it ends just before it
        b = completion_body(max_tokens=32, temperature=0, ignore_eos=True)
        full = post(MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        cut = None
        for i in range(1, len(full)):
            if full[i].isascii() and full[i].isalnum() and full[i] not in full[:i]:
                cut = i
                break
        if cut is None:
            self.skipTest("no usable stop character in the greedy text %r" % full)
        r = post(MAIN.port, "/v1/completions", dict(b, stop=[full[cut]]))
        self.assertEqual(r.status, 200, r)
        ch = r.json()["choices"][0]
        self.assertEqual(ch["finish_reason"], "stop", (full, full[cut], ch))
        self.assertEqual(ch["text"], full[:cut], (full, full[cut], ch))

    def test_logprobs_shapes(self):
        r = post(MAIN.port, "/v1/chat/completions", chat_body(max_tokens=3, ignore_eos=True, logprobs=True, top_logprobs=2))
        self.assertEqual(r.status, 200, r)
        content = r.json()["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), 3)
        for e in content:
            self.assertIsInstance(e["token"], str)
            self.assertLessEqual(e["logprob"], 0.0)
            self.assertEqual(len(e["top_logprobs"]), 2)
        r = post(MAIN.port, "/v1/completions", completion_body(max_tokens=3, ignore_eos=True, logprobs=2))
        self.assertEqual(r.status, 200, r)
        lp = r.json()["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), 3)
        self.assertEqual(len(lp["token_logprobs"]), 3)
        self.assertEqual(len(lp["text_offset"]), 3)

    def test_accepted_optional_fields(self):
        # every supported field at a valid value is accepted
        ok_chat = dict(temperature=0.5, top_p=0.9, top_k=5, min_p=0.05, n=1, stop=["\n\n", "END"], stop_token_ids=[5],
                       seed=7, presence_penalty=0.5, frequency_penalty=-0.5, repetition_penalty=1.1,
                       logit_bias={"5": 10, "6": -100}, logprobs=False, ignore_eos=False,
                       response_format={"type": "text"}, tool_choice="none",
                       tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
                       max_completion_tokens=3)
        r = post(MAIN.port, "/v1/chat/completions", chat_body(**ok_chat))
        self.assertEqual(r.status, 200, r)
        r = post(MAIN.port, "/v1/chat/completions", chat_body(tool_choice="auto", top_k=-1, stop="x", model=None))
        self.assertEqual(r.status, 200, r)
        r = post(MAIN.port, "/v1/completions", completion_body(prompt=[1, 2, 3], echo=True, logprobs=None, seed=0))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.json()["choices"][0]["text"].startswith(
            post(MAIN.port, "/detokenize", {"tokens": [1, 2, 3]}).json()["prompt"]))
        r = post(MAIN.port, "/v1/completions", completion_body(prompt=["a", "b"], max_tokens=2))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.json()["choices"]), 2)


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
    ("response_format json_object", {"response_format": {"type": "json_object"}}, 400, "response_format"),
    ("response_format json_schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
     400, "response_format"),
    ("response_format str", {"response_format": "text"}, 400, "response_format"),
    ("guided_json", {"guided_json": {"type": "object"}}, 400, "guided_json"),
    ("guided_regex", {"guided_regex": "a+"}, 400, "guided_regex"),
    ("guided_choice", {"guided_choice": ["a", "b"]}, 400, "guided_choice"),
    ("guided_grammar", {"guided_grammar": "root ::= \"a\""}, 400, "guided_grammar"),
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
    ("tool_choice required", {"tool_choice": "required",
                              "tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "tool_choice"),
    ("tool_choice object", {"tool_choice": {"type": "function", "function": {"name": "f"}},
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

POST_ROUTES = ["/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"]


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
        cls.m0 = metrics(MAIN.port)

    def _expect(self, path, body, status, param, name):
        r = post(MAIN.port, path, body)
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
                    r = post(MAIN.port, path, raw)
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
            ("/detokenize", {"tokens": [VOCAB + 100]}, 400),
            ("/detokenize", {"tokens": [1.5]}, 400),
            ("/detokenize", {"tokens": [[1]]}, 400),
            ("/detokenize", {"tokens": [2 ** 64 - 1]}, 400),
            ("/detokenize", {"tokens": [2 ** 63]}, 400),
            ("/detokenize", {"tokens": [-2 ** 63]}, 400),
        ]
        for path, body, status in cases:
            with self.subTest(path=path, body=body):
                check_error(self, post(MAIN.port, path, body), status, None, "%s %r" % (path, body))
        r = post(MAIN.port, "/detokenize", {"tokens": [VOCAB - 1]})
        self.assertEqual(r.status, 200, r)

    def test_f_routes(self):
        cases = [("GET", "/v1/chat/completions"), ("GET", "/v1/completions"), ("GET", "/tokenize"),
                 ("GET", "/detokenize"), ("GET", "/nope"), ("GET", "/v1/nope"), ("GET", "/v1/models/extra"),
                 ("POST", "/v1/models"), ("POST", "/nope"), ("POST", "/health"), ("PUT", "/v1/chat/completions"),
                 ("DELETE", "/health"), ("PATCH", "/v1/models")]
        for method, path in cases:
            with self.subTest(method=method, path=path):
                body = b"{}" if method in ("POST", "PUT", "PATCH") else None
                r = request(MAIN.port, method, path, body)
                check_error(self, r, (404, 405), None, "%s %s" % (method, path))

    def test_g_post_without_content_length(self):
        # a POST with neither Content-Length nor chunked encoding: a 4xx, not a hang or 5xx
        s = socket.create_connection(("127.0.0.1", MAIN.port), timeout=30)
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
        r = get(MAIN.port, "/health")
        self.assertEqual(r.status, 200, r)
        r = post(MAIN.port, "/v1/chat/completions", chat_body(max_tokens=4, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["finish_reason"], "length")
        r = post(MAIN.port, "/v1/completions", completion_body(max_tokens=4, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        s = stream(MAIN.port, "/v1/completions", completion_body(max_tokens=4, ignore_eos=True, stream=True))
        self.assertTrue(s.done)
        m1 = metrics(MAIN.port)
        self.assertEqual(m1['kimi:http_responses_total{code="5xx"}'], 0, "a 5xx was answered")
        self.assertGreater(m1['kimi:http_responses_total{code="4xx"}'], self.m0['kimi:http_responses_total{code="4xx"}'])
        m1 = wait_metrics(MAIN.port, idle, timeout=5)     # the engine gauges may lag by a step
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


# ----------------------------------------------------------------------------------------------
# 6. Client disconnect
# ----------------------------------------------------------------------------------------------

def open_raw_stream(port, path, body):
    """A streaming POST on a raw socket; returns the socket once the status line and a few SSE
    events arrived."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body).encode()
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    return s


def read_until(s, pred, timeout=60.0):
    got = b""
    deadline = time.monotonic() + timeout
    while not pred(got):
        if time.monotonic() > deadline:
            raise AssertionError("timed out reading the stream: %r" % got[-300:])
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


class T6Disconnect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-model-len", "4096")

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()

    def _disconnect(self, path, body):
        port = self.srv.port
        m0 = metrics(port)
        s = open_raw_stream(port, path, body)
        try:
            got = read_until(s, lambda g: g.count(b"data: ") >= 4)
            self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:200])
            # it is running now
            m = metrics(port)
            self.assertGreaterEqual(m["kimi:num_requests_running"] + m["kimi:num_requests_waiting"], 1)
            self.assertGreater(m["kimi:cache_blocks_used"], 0)
        finally:
            s.close()
        t0 = time.monotonic()
        ab = 'kimi:request_success_total{finished_reason="abort"}'
        m1 = wait_metrics(port, lambda m: m["kimi:num_requests_running"] == 0 and m["kimi:num_requests_waiting"] == 0
                          and m["kimi:cache_blocks_used"] == 0 and m["kimi:state_slots_used"] == 0
                          and m[ab] > m0[ab], timeout=10)
        self.assertEqual(m1["kimi:num_requests_running"], 0, "still running %.1f s after the client left" %
                         (time.monotonic() - t0))
        self.assertEqual(m1["kimi:num_requests_waiting"], 0)
        self.assertEqual(m1["kimi:cache_blocks_used"], 0, "cache blocks not freed after the client left")
        self.assertEqual(m1["kimi:state_slots_used"], 0, "state slots not freed after the client left")
        ln = 'kimi:request_success_total{finished_reason="length"}'
        self.assertEqual(m1[ln], m0[ln], "the abandoned request must not finish as 'length'")
        self.assertEqual(m1[ab] - m0[ab], body.get("n", 1),
                         "a client leaving mid-stream is counted as finished_reason=abort")

    def test_disconnect_completion(self):
        self._disconnect("/v1/completions", completion_body(max_tokens=2000, ignore_eos=True, stream=True))
        self.assertEqual(get(self.srv.port, "/health").status, 200)

    def test_disconnect_chat_n2(self):
        self._disconnect("/v1/chat/completions", chat_body(max_tokens=2000, ignore_eos=True, n=2, stream=True))
        r = post(self.srv.port, "/v1/completions", completion_body(max_tokens=4, ignore_eos=True))
        self.assertEqual(r.status, 200, r)


# ----------------------------------------------------------------------------------------------
# 7. Shutdown and loading
# ----------------------------------------------------------------------------------------------

class T7Shutdown(unittest.TestCase):
    def test_a_idle_sigterm(self):
        srv = Server()
        try:
            self.assertEqual(get(srv.port, "/health").status, 200)
            t0 = time.monotonic()
            srv.send(signal.SIGTERM)
            rc = srv.wait(10)
            dt = time.monotonic() - t0
            self.assertEqual(rc, 0, "exit code after SIGTERM\n" + srv.log())
            self.assertLess(dt, 3.0, "idle shutdown took %.1f s" % dt)
            self.assertIn("serve: stopped", "".join(ln for ln in srv.err if ln))
            with self.assertRaises(OSError):
                socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        finally:
            srv.kill()

    def test_a_idle_keepalive_connection(self):
        # an idle kept-alive connection (any pooling client holds one) is not an in-flight
        # request: it must not hold the exit up past the grace
        srv = Server("--shutdown-grace", "0.5")
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        try:
            conn.request("GET", "/health")
            self.assertEqual(conn.getresponse().read(), b'{"status":"ok"}')
            time.sleep(0.5)           # idle, as a pooled connection is between requests
            t0 = time.monotonic()
            srv.send(signal.SIGTERM)
            rc = srv.wait(15)
            dt = time.monotonic() - t0
            self.assertEqual(rc, 0, "exit code after SIGTERM\n" + srv.log())
            self.assertLess(dt, 3.0, "with an idle keep-alive connection open, exit took %.1f s "
                                     "(--shutdown-grace 0.5)" % dt)
        finally:
            conn.close()
            srv.kill()

    def test_a_idle_sigint(self):
        srv = Server()
        try:
            t0 = time.monotonic()
            srv.send(signal.SIGINT)
            rc = srv.wait(10)
            self.assertEqual(rc, 0, srv.log())
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            srv.kill()

    def test_b_inflight_completes(self):
        srv = Server("--shutdown-grace", "60")
        try:
            body = completion_body(max_tokens=128, ignore_eos=True, stream=True, stream_options={"include_usage": True})
            conn, r = open_stream(srv.port, "/v1/completions", body, timeout=60)
            self.assertEqual(r.status, 200)
            events = sse_events(r)
            first = next(e for e in events if e[0] == "data")
            t0 = time.monotonic()
            srv.send(signal.SIGINT)
            # new work is refused once the server drains: connection refused or 503
            srv.wait_line(srv.err, re.compile(r"serve: shutting down"), 10)
            time.sleep(0.3)
            try:
                late = post(srv.port, "/v1/completions", completion_body(max_tokens=2), timeout=10)
                check_error(self, late, 503, None, "a request after SIGINT")
            except (OSError, http.client.HTTPException):
                pass          # not accepted at all: fine
            datas = [first[1]] + [p for k, p in events if k == "data"]
            r.close()
            conn.close()
            self.assertEqual(datas[-1], "[DONE]", "the in-flight stream did not complete")
            chunks = [json.loads(d) for d in datas[:-1]]
            self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 128, "the in-flight request was cut short")
            finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
            self.assertEqual(finishes[-1], "length")
            rc = srv.wait(20)
            self.assertEqual(rc, 0, "exit code after SIGINT with a request in flight\n" + srv.log())
            self.assertLess(time.monotonic() - t0, 30.0)
        finally:
            srv.kill()

    def test_c_grace_expires(self):
        srv = Server("--shutdown-grace", "0.5", "--max-model-len", "4096")
        try:
            body = completion_body(max_tokens=4000, ignore_eos=True, stream=True)
            conn, r = open_stream(srv.port, "/v1/completions", body, timeout=30)
            self.assertEqual(r.status, 200)
            events = sse_events(r)
            datas = []
            for k, p in events:
                if k == "data":
                    datas.append(p)
                if len(datas) == 3:
                    break
            t0 = time.monotonic()
            srv.send(signal.SIGTERM)
            try:
                for k, p in events:
                    if k == "data":
                        datas.append(p)
            except (OSError, http.client.HTTPException, AssertionError):
                pass       # the stream may also be cut; it must end either way
            t_end = time.monotonic() - t0
            r.close()
            conn.close()
            rc = srv.wait(15)
            t_exit = time.monotonic() - t0
            self.assertEqual(rc, 0, "exit code after the grace ran out\n" + srv.log())
            self.assertLess(t_end, 8.0, "the stream did not end soon after the grace")
            self.assertLess(t_exit, 10.0, "exit took %.1f s with --shutdown-grace 0.5" % t_exit)
            chunks = [json.loads(d) for d in datas if d != "[DONE]"]
            finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
            self.assertTrue(datas[-1] == "[DONE]" or finishes[-1] == "abort", datas[-3:])
            if finishes[-1] is not None:
                self.assertEqual(finishes[-1], "abort", "a request cut at shutdown finishes as 'abort'")
            self.assertLess(len(chunks), 4000, "the long request was not aborted")
        finally:
            srv.kill()

    def test_d_loading(self):
        # config.json is a FIFO: loading blocks on it, so the loading state lasts as long as we like
        d = tempfile.mkdtemp(prefix="kimi-http-load-")
        _TMPDIRS.append(d)
        for f in os.listdir(MODEL_DIR):
            if f != "config.json":
                shutil.copy(os.path.join(MODEL_DIR, f), d)
        with open(os.path.join(MODEL_DIR, "config.json"), "rb") as f:
            config = f.read()
        fifo = os.path.join(d, "config.json")
        os.mkfifo(fifo)
        srv = Server(model=d, wait_ready=False)
        try:
            r = get(srv.port, "/health", timeout=10)
            self.assertEqual(r.status, 503, r)
            self.assertEqual(r.json(), {"status": "loading"})
            self.assertEqual(get(srv.port, "/version", timeout=10).status, 200)
            r = get(srv.port, "/metrics", timeout=10)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(parse_prometheus(r.body.decode())[0]["kimi:ready"], 0)
            self.assertEqual(get(srv.port, "/").status, 200)
            check_error(self, post(srv.port, "/v1/chat/completions", chat_body(), timeout=10), 503)
            check_error(self, post(srv.port, "/v1/completions", completion_body(), timeout=10), 503)
            check_error(self, post(srv.port, "/tokenize", {"prompt": "hi"}, timeout=10), 503)
            check_error(self, get(srv.port, "/v1/models", timeout=10), 503)
            # let it load
            deadline = time.monotonic() + 20
            while True:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError:
                    if time.monotonic() > deadline or not srv.alive():
                        raise AssertionError("the server never opened config.json\n" + srv.log())
                    time.sleep(0.05)
            os.set_blocking(fd, True)
            os.write(fd, config)
            os.close(fd)
            srv.wait_ready(60)
            r = get(srv.port, "/health")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json(), {"status": "ok"})
            r = post(srv.port, "/v1/chat/completions", chat_body(max_tokens=2))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(srv.stop(signal.SIGTERM), 0, srv.log())
        finally:
            srv.kill()

    def test_d_signal_while_loading(self):
        d = tempfile.mkdtemp(prefix="kimi-http-load-")
        _TMPDIRS.append(d)
        os.mkfifo(os.path.join(d, "config.json"))
        srv = Server(model=d, wait_ready=False)
        try:
            self.assertEqual(get(srv.port, "/health", timeout=10).status, 503)
            t0 = time.monotonic()
            srv.send(signal.SIGTERM)
            rc = srv.wait(10)
            self.assertIsNotNone(rc, "SIGTERM while loading did not end the server")
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            srv.kill()

    def test_d_ready_health(self):
        # with a real model the loading window is too short to catch reliably; once the banner
        # is printed, /health is 200
        srv = Server()
        try:
            self.assertEqual(get(srv.port, "/health").json(), {"status": "ok"})
        finally:
            srv.kill()


# ----------------------------------------------------------------------------------------------

def setUpModule():
    global MODEL_DIR, VOCAB, MAIN
    MODEL_DIR = make_model(seed=1)
    with open(os.path.join(MODEL_DIR, "config.json")) as f:
        VOCAB = json.load(f)["vocab_size"]
    MAIN = Server("--max-model-len", "4096")


def tearDownModule():
    kill_all()


def main():
    global KIMI
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kimi", required=True, help="path of the kimi-cpp binary")
    args, rest = ap.parse_known_args()
    KIMI = os.path.abspath(args.kimi)
    if not os.access(KIMI, os.X_OK):
        sys.exit("not an executable: %s" % KIMI)
    def on_term(sig, frame):
        kill_all()
        for d in _TMPDIRS:
            shutil.rmtree(d, ignore_errors=True)
        os._exit(1)

    signal.signal(signal.SIGTERM, on_term)
    t0 = time.monotonic()
    ok = False
    try:
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
        ok = prog.result.wasSuccessful()
    finally:
        kill_all()
        for d in _TMPDIRS:
            shutil.rmtree(d, ignore_errors=True)
    sys.stderr.write("http_test: %s in %.1f s\n" % ("OK" if ok else "FAILED", time.monotonic() - t0))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
