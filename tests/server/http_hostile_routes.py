"""HTTP tests, part 17: the new routes under hostile clients (issue 56's reproducers), each as the
fixed behaviour:

- amplification through stored responses: a chain of /v1/responses with large images counts
  toward --max-body-mb as the client would send it (images as base64), so the link that would
  pass it is a 413 naming previous_response_id; four concurrent 150-byte continuations of the
  largest chain allowed raise the server's peak RSS (VmHWM, reset through /proc/PID/clear_refs)
  by a bounded amount (it was 2,463 MiB from 260 MiB with a 120 MB chain);
- a quadratic JSON Schema: 100,000 properties with 100,000 `required` names (4 MB), and a schema
  filling the largest body allowed (16 MiB), are a 400 well under a second past what reading
  the body costs any route (12.75 s and ~13 minutes before); a name listed twice in `required`
  is a 400 naming it;
- forged log lines: a path with %0a, %0d, %1b (ANSI) and a fake "error:" line writes one access
  line, its control bytes escaped;
- the empty --api-key: with $KIMI_API_KEY set the server uses it (and says so), without it
  the server refuses to start; a key file's surrounding whitespace is not part of the key;
- count_tokens decodes images as /v1/messages does: a GIF whose header is fine and whose data
  is not is a 400 on both (count_tokens read only the header and answered 200).
Run through http_test.py.
"""
import json
import os
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import zlib

import http_common as hc
from http_common import Server, check_error, get, post, request

K3 = None      # k3-tiny (a vision tower), --max-body-mb 4
PLAIN = None   # Kimi Linear tiny


def setUpModule():
    global K3, PLAIN
    K3 = Server("--max-body-mb", "4", "--max-model-len", "2048", model=hc.make_model(seed=31, preset="k3-tiny"))
    PLAIN = Server("--max-model-len", "2048", model=hc.make_model(seed=32))


def padded_png(pad_bytes):
    """A 1x1 PNG with an ancillary chunk of pad_bytes (a decoder skips it): few image tokens, many bytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\x80\x40\x20")
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"zzPd", os.urandom(pad_bytes)) +
            chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def image_input(png, text="What is this?"):
    import base64
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    return [{"role": "user", "content": [{"type": "input_image", "image_url": url}, {"type": "input_text", "text": text}]}]


def vm_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no " + field)


class T17HostileRoutes(unittest.TestCase):
    def responses(self, srv, body):
        return post(srv.port, "/v1/responses", dict({"model": hc.SERVED, "max_output_tokens": 1, "temperature": 0}, **body),
                    timeout=120)

    def test_a_a_stored_chain_costs_no_more_than_a_request(self):
        limit = 4 << 20
        first = self.responses(K3, {"input": image_input(padded_png(2_500_000))})   # 3.3 MB of base64
        self.assertEqual(first.status, 200, first)
        rid = first.json()["id"]
        # a second large image on top: the chain would pass --max-body-mb, as one request would
        r = self.responses(K3, {"input": image_input(padded_png(2_500_000)), "previous_response_id": rid})
        check_error(self, r, 413, "previous_response_id", "a chain past --max-body-mb")
        self.assertIn("--max-body-mb", r.json()["error"]["message"])
        # continuing with a few words is served, the stored image read back by its key
        nxt = self.responses(K3, {"input": "and this?", "previous_response_id": rid})
        self.assertEqual(nxt.status, 200, nxt)
        self.assertGreater(nxt.json()["usage"]["input_tokens"], first.json()["usage"]["input_tokens"])
        last = nxt.json()["id"]
        got = get(K3.port, "/v1/responses/" + last)
        self.assertEqual(got.status, 200, got)
        # four concurrent 150-byte continuations of the largest chain allowed: the peak RSS grows
        # by a bounded amount (each reads the stored conversation shared, its image once)
        pid = K3.proc.pid
        try:
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")   # VmHWM := VmRSS
        except OSError:
            self.skipTest("cannot reset the peak RSS of the server (/proc/PID/clear_refs)")
        base = vm_kib(pid, "VmHWM")
        out = []
        body = {"input": "x", "max_output_tokens": 1, "previous_response_id": last, "store": False}
        threads = [threading.Thread(target=lambda: out.append(self.responses(K3, body))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([r.status for r in out], [200] * 4, out)
        grew = vm_kib(pid, "VmHWM") - base
        print("\n      peak RSS grew %d KiB for 4 continuations of a %d-byte chain" % (grew, limit), end=" ")
        self.assertLess(grew * 1024, 4 * 6 * limit, "peak RSS grew %d KiB" % grew)

    def test_b_schemas_are_compiled_in_linear_time(self):
        def schema(n, repeat=False):
            props = ",".join('"p%d":{"type":"integer"}' % i for i in range(n))
            req = ",".join('"p%d"' % (0 if repeat else i) for i in range(n))
            return '{"type":"object","properties":{%s},"required":[%s]}' % (props, req)

        def chat(s):
            return ('{"model":"%s","messages":[{"role":"user","content":"hi"}],"max_tokens":1,'
                    '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":%s}}}' % (hc.SERVED, s))

        for n, what in ((100000, "100,000 properties and required names (4 MB)"),
                        (390000, "the largest body allowed (16 MiB)")):
            body = chat(schema(n)).encode()
            self.assertLess(len(body), 16 << 20, what)
            # what reading the same bytes costs any route: /tokenize parses them, then refuses
            t0 = time.monotonic()
            r = post(PLAIN.port, "/tokenize", body)
            read = time.monotonic() - t0
            self.assertEqual(r.status, 400, r)
            t0 = time.monotonic()
            r = post(PLAIN.port, "/v1/chat/completions", body)
            took = time.monotonic() - t0
            check_error(self, r, 400, "response_format", what)
            self.assertIn("too large", r.json()["error"]["message"])
            print("\n      %s: 400 in %.3f s (reading the body: %.3f s)" % (what, took, read), end=" ")
            self.assertLess(took - read, 0.5, "%s took %.2f s, %.2f s past reading it" % (what, took, took - read))
        r = post(PLAIN.port, "/v1/chat/completions", chat(schema(3, repeat=True)).encode())
        check_error(self, r, 400, "response_format", "a required name twice")
        self.assertIn("twice", r.json()["error"]["message"])
        self.assertEqual(post(PLAIN.port, "/v1/chat/completions", chat(schema(3)).encode()).status, 200)

    def test_c_paths_cannot_forge_log_lines(self):
        marker = "forged%d" % os.getpid()
        paths = ["/nope%0aaccess:%202026-01-01T00:00:00Z%20GET%20/" + marker + "%20200",
                 "/nope%0d%0aerror:%20" + marker, "/v1/models%1b[31m" + marker + "%1b[0m"]
        for p in paths:
            r = get(PLAIN.port, p)
            self.assertIn(r.status, (404, 200), r)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and sum(marker in ln for ln in PLAIN.err) < len(paths):
            time.sleep(0.05)
        lines = [ln for ln in PLAIN.err if marker in ln]
        self.assertEqual(len(lines), len(paths), "one access line per request: %r" % lines)
        for ln in lines:
            self.assertTrue(ln.startswith("access: "), ln)
            self.assertFalse(any(ord(c) < 0x20 and c != "\n" for c in ln), "a raw control byte: %r" % ln)
            self.assertNotIn("\x1b", ln)
        self.assertTrue(any("\\n" in ln for ln in lines) and any("\\x1b" in ln for ln in lines), lines)

    def test_d_an_empty_api_key_never_turns_auth_off(self):
        env = dict(os.environ, KIMI_API_KEY="k-env")
        model = PLAIN.args[PLAIN.args.index("--model") + 1]
        srv = Server("--api-key", "", model=model, env=env)
        try:
            self.assertEqual(get(srv.port, "/v1/models").status, 401, "no key")
            self.assertEqual(get(srv.port, "/v1/models", headers={"Authorization": "Bearer k-env"}).status, 200)
            self.assertIn("--api-key is empty: using $KIMI_API_KEY", "".join(srv.err))
        finally:
            srv.kill()
        no_env = {k: v for k, v in os.environ.items() if k != "KIMI_API_KEY"}
        p = subprocess.run([hc.KIMI, "serve", "--model", model, "--port", "0", "--api-key", ""], env=no_env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        self.assertNotEqual(p.returncode, 0, "an empty --api-key without $KIMI_API_KEY must not serve")
        self.assertIn(b"--api-key is empty", p.stderr)
        with tempfile.TemporaryDirectory(prefix="kimi-http-key-") as d:
            path = os.path.join(d, "key")
            with open(path, "w") as f:
                f.write("  k-file \t\r\n")
            srv = Server("--api-key-file", path, model=model)
            try:
                self.assertEqual(get(srv.port, "/v1/models", headers={"Authorization": "Bearer k-file"}).status, 200)
                self.assertEqual(get(srv.port, "/v1/models").status, 401)
            finally:
                srv.kill()

    def test_e_count_tokens_refuses_what_messages_refuses(self):
        import base64
        import io
        from PIL import Image
        buf = io.BytesIO()
        Image.new("RGB", (16, 16), (200, 30, 30)).save(buf, "GIF")
        defective = (b"GIF89a" + struct.pack("<HHBBB", 8, 8, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff" + b"," +
                     struct.pack("<HHHHB", 0, 0, 8, 8, 0) + b"\x02\x05\xff\xff\xff\xff\xff\x00;")   # bad LZW data
        for name, gif, status in (("a GIF", buf.getvalue(), 200), ("a GIF whose header is fine, its data not", defective, 400)):
            src = {"type": "base64", "media_type": "image/gif", "data": base64.b64encode(gif).decode()}
            msgs = [{"role": "user", "content": [{"type": "image", "source": src}, {"type": "text", "text": "hi"}]}]
            count = post(K3.port, "/v1/messages/count_tokens", {"model": hc.SERVED, "messages": msgs})
            reply = post(K3.port, "/v1/messages", {"model": hc.SERVED, "messages": msgs, "max_tokens": 1})
            self.assertEqual((count.status, reply.status), (status, status), "%s: %r %r" % (name, count, reply))
            if status == 200:
                usage = reply.json()["usage"]
                self.assertEqual(count.json()["input_tokens"], usage["input_tokens"] + usage["cache_read_input_tokens"])


if __name__ == "__main__":
    unittest.main()
