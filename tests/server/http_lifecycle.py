"""HTTP tests, parts 6 and 7: a client leaving mid-stream, and the server's shutdown and loading.

6. disconnect a client leaving mid-stream frees its running slot, cache blocks and state slots,
              and is counted as an abort
7. shutdown   SIGTERM idle -> exit 0; SIGINT with a stream in flight -> it completes, exit 0;
              --shutdown-grace 0.5 with a long stream -> aborted, exit 0; /health 503 while loading
Run through http_test.py.
"""
import http.client
import json
import os
import re
import signal
import socket
import tempfile
import time
import unittest

import http_common as hc
from http_common import (Server, chat_body, check_error, completion_body, get, metrics, open_stream,
                         parse_prometheus, post, sse_events, wait_metrics)

setUpModule = hc.setup_shared      # the model and the shared server: once, for all the modules


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
            err = "".join(ln for ln in srv.err if ln)
            self.assertIn("serve: stopped", err)
            # cold start: the load rate, and the time to ready with its two parts
            self.assertRegex(err, r"load: [\d.]+ (MiB|GiB) of weights in [\d.]+ s \([\d.]+ GB/s, (huge-page copy|mmap)")
            m = re.search(r"serve: ready in ([\d.]+) s \(weights ([\d.]+) s, engine start with its profile run ([\d.]+) s\)", err)
            self.assertIsNotNone(m, err)
            self.assertGreaterEqual(float(m.group(1)) + 0.01, float(m.group(2)) + float(m.group(3)))
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
        # long enough to outlast the grace on any machine: the tiny model decodes ~10k tokens/s
        srv = Server("--shutdown-grace", "0.5", "--max-model-len", "65536")
        try:
            body = completion_body(max_tokens=60000, ignore_eos=True, stream=True)
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
            self.assertLess(len(chunks), 60000, "the long request was not aborted")
        finally:
            srv.kill()

    def test_d_loading(self):
        # KIMI_LOAD_GATE holds the loading state while its file exists (a named pipe in place of
        # config.json used to do it, but the loader now refuses anything but a regular file)
        d = tempfile.mkdtemp(prefix="kimi-http-load-")
        hc.TMPDIRS.append(d)
        gate = os.path.join(d, "gate")
        open(gate, "w").close()
        srv = Server(model=hc.MODEL_DIR, wait_ready=False, env={"KIMI_LOAD_GATE": gate})
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
            os.remove(gate)   # let it load
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
        hc.TMPDIRS.append(d)
        gate = os.path.join(d, "gate")
        open(gate, "w").close()
        srv = Server(model=hc.MODEL_DIR, wait_ready=False, env={"KIMI_LOAD_GATE": gate})
        try:
            self.assertEqual(get(srv.port, "/health", timeout=10).status, 503)
            t0 = time.monotonic()
            srv.send(signal.SIGTERM)
            rc = srv.wait(10)
            self.assertIsNotNone(rc, "SIGTERM while loading did not end the server")
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            srv.kill()

    def test_d_named_pipe_is_refused(self):
        # a named pipe as config.json: refused at once with a clear message, not waited on
        d = tempfile.mkdtemp(prefix="kimi-http-load-")
        hc.TMPDIRS.append(d)
        os.mkfifo(os.path.join(d, "config.json"))
        srv = Server(model=d, wait_ready=False)
        try:
            rc = srv.wait(10)
            self.assertEqual(rc, 1, srv.log())
            self.assertIn("config.json: not a regular file", srv.log())
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
