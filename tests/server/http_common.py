"""Shared helpers of the `kimi-cpp serve` HTTP tests (standard library only).

Used by http_test.py (the runner) and its test modules http_*.py, and by make_serve_test.py:
  * Server: one `kimi-cpp serve` on --port 0, a KimiServer of tests/common/kimi_server.py (the port
    it listens on is read from its stderr, stdout/stderr collected); kill_all() / cleanup() end every
    server and temporary directory;
  * setup_shared(): the random tiny model and the shared server, made once for all modules;
  * request/get/post, SSE framing (open_stream, sse_events, stream), Prometheus parsing
    (parse_prometheus, metrics, wait_metrics, idle), request bodies and the error-JSON check.

Shared state, set at run time (read it as http_common.NAME, not `from http_common import NAME`):
KIMI (set by the runner), MODEL_DIR, VOCAB and MAIN (set by setup_shared()).
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from kimi_server import READY_RE, KimiServer, stop_all  # noqa: E402

KIMI = None            # path of kimi-cpp (--kimi)
MODEL_DIR = None       # the random tiny model, made once
SERVED = "kimi-tiny"
VOCAB = None           # the model's vocab_size (from config.json)
MAIN = None            # the shared server (--max-model-len 4096)
TMPDIRS = []           # every temporary directory made, removed at exit


# ----------------------------------------------------------------------------------------------
# Servers
# ----------------------------------------------------------------------------------------------

class Server(KimiServer):
    """One `kimi-cpp serve` process on --port 0 (tests/common/kimi_server.py), ready once it prints
    its banner; wait_line takes the list to search (self.out or self.err)."""

    def __init__(self, *extra, model=None, wait_ready=True, timeout=60.0, served=SERVED, env=None, address_space=None):
        named = ["--served-model-name", served] if served else []   # served=None: the server's default name
        self.served = served
        self.version = None
        self.args = [KIMI, "serve", "--model", model or MODEL_DIR, "--port", "0", *named, "--threads", "2", *extra]
        super().__init__(self.args, env=dict(os.environ, **env) if env else None, timeout=timeout,
                         wait_ready=wait_ready, address_space=address_space, ready=READY_RE)

    def wait_line(self, lines, regex, timeout):
        return super().wait_line(regex, timeout, "out" if lines is self.out else "err")

    def wait_ready(self, timeout=60.0):
        m = super().wait_ready(timeout)
        self.version = m.group(1)
        assert self.served is None or m.group(2) == self.served, m.group(0)
        assert int(m.group(3)) == self.port, "ready line port %s != listening port %d" % (m.group(3), self.port)

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        return super().stop(timeout, sig)


def kill_all():
    stop_all(timeout=0)


def make_model(seed=1, preset="tiny", extra=()):
    d = tempfile.mkdtemp(prefix="kimi-http-test-")
    TMPDIRS.append(d)
    out = os.path.join(d, "model")
    subprocess.run([KIMI, "make-model", "--preset", preset, "--seed", str(seed), "--out", out, *extra], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    return out


_SETUP_ERROR = None


def setup_shared():
    """The random tiny model and the shared server (--max-model-len 4096): made by the first
    test module that asks (its setUpModule), reused by the others."""
    global MODEL_DIR, VOCAB, MAIN, _SETUP_ERROR
    if MAIN is not None:
        return
    if _SETUP_ERROR is not None:
        raise AssertionError("the shared model and server could not be set up: %s" % _SETUP_ERROR)
    try:
        MODEL_DIR = make_model(seed=1)
        with open(os.path.join(MODEL_DIR, "config.json")) as f:
            VOCAB = json.load(f)["vocab_size"]
        MAIN = Server("--max-model-len", "4096")
    except BaseException as e:
        _SETUP_ERROR = str(e)[:2000] or repr(e)
        raise


def cleanup():
    """Kills every server started and removes every temporary directory (also on failure)."""
    kill_all()
    for d in TMPDIRS:
        shutil.rmtree(d, ignore_errors=True)


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


# every POST endpoint (bad bodies, body limits and the fuzzer go to each)
POST_ROUTES = ["/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"]
