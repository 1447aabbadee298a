"""HTTP tests, part 14: the smaller items of the server's security review, each end to end.

- Lenient where clients are careless: an image as a `DATA:` URL (scheme, media type and
  `;base64` in any case), its base64 wrapped in 76-column lines (`\\n` and `\\r\\n`), in the
  URL-safe alphabet, without `=` padding: all 200, the same prompt as the canonical URL; a
  character outside base64 is still a 400.
- file:// URLs under --allowed-local-media-path: a path with `%00` (or another control
  character) once decoded is a 400; a file named `..x.png` inside the folder is a 200; `../` out
  of it stays a 400.
- --api-key: `Authorization: bearer KEY` (the scheme in any case, any number of spaces) is a 200,
  a wrong key a 401.
- Strict where it matters: a POST whose Content-Type is text/plain, form-encoded or missing is a
  415 with the error JSON on every POST route (`application/json; charset=utf-8` and any case of
  the media type are served), and the server goes on serving.
- An unknown message role ("root") is a 400 naming it, on Kimi Linear and on K3 (chat and
  /tokenize); OpenAI's roles are still served.
- --mmap: a server whose safetensors file is truncated under it exits non-zero (not by a signal)
  with one line on stderr naming the file, at the next request.
Run through http_test.py.
"""
import base64
import http.client
import json
import os
import re
import shutil
import struct
import tempfile
import time
import unittest
import zlib

import http_common as hc
from http_common import Server, chat_body, check_error, completion_body, post

K3 = None        # a k3-tiny server with --allowed-local-media-path MEDIA
MEDIA = None     # the allowed folder
OUTSIDE = None   # a folder beside it


def png(w, h, pixel):
    """An 8-bit RGB PNG (standard library only); pixel(x, y) -> (r, g, b)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes(c for x in range(w) for c in pixel(x, y)) for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


IMAGE = png(90, 60, lambda x, y: ((x * 37 + y * 11) & 255, (x * y) & 255, (y * 29 + 7) & 255))


def image_chat(url):
    return chat_body(max_tokens=2, temperature=0, messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": url}}]}])


def raw_post(port, path, body, headers):
    """A POST with exactly these headers (http_common.request adds a JSON Content-Type)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return hc.Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def setUpModule():
    global K3, MEDIA, OUTSIDE
    hc.setup_shared()
    d = tempfile.mkdtemp(prefix="kimi-http-strict-")
    hc.TMPDIRS.append(d)
    MEDIA, OUTSIDE = os.path.join(d, "media"), os.path.join(d, "outside")
    os.mkdir(MEDIA)
    os.mkdir(OUTSIDE)
    for folder, name in ((MEDIA, "ok.png"), (MEDIA, "..x.png"), (MEDIA, "x.png"), (OUTSIDE, "x.png")):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(IMAGE)
    K3 = Server("--max-model-len", "512", "--allowed-local-media-path", MEDIA,
                model=hc.make_model(seed=6, preset="k3-tiny"))


class T14Strict(unittest.TestCase):
    def served(self, port, body, what):
        r = post(port, "/v1/chat/completions", body)
        self.assertEqual(r.status, 200, "%s: %r" % (what, r))
        return r.json()

    def refused(self, port, body, status, what, text=None, path="/v1/chat/completions"):
        r = post(port, path, body)
        e = check_error(self, r, status, None, what)
        if text is not None:
            self.assertIn(text, e["message"], what)
        return e

    def test_a_data_url_variants(self):
        b64 = base64.b64encode(IMAGE).decode()
        self.assertTrue("+" in b64 and "/" in b64 and b64.endswith("="), "the image should exercise every variant")
        lines = [b64[i:i + 76] for i in range(0, len(b64), 76)]
        urlsafe = base64.urlsafe_b64encode(IMAGE).decode()
        want = self.served(K3.port, image_chat("data:image/png;base64," + b64), "canonical")["usage"]["prompt_tokens"]
        for name, url in (("DATA: upper case", "DATA:image/png;base64," + b64),
                          ("media type and base64 in other cases", "Data:Image/PNG;BASE64," + b64),
                          ("wrapped, \\n", "data:image/png;base64," + "\n".join(lines) + "\n"),
                          ("wrapped, \\r\\n", "data:image/png;base64," + "\r\n".join(lines) + "\r\n"),
                          ("URL-safe", "data:image/png;base64," + urlsafe),
                          ("no padding", "data:image/png;base64," + b64.rstrip("=")),
                          ("URL-safe, unpadded, wrapped", "data:image/png;base64," + "\n".join(
                              urlsafe.rstrip("=")[i:i + 76] for i in range(0, len(b64), 76)))):
            with self.subTest(name):
                self.assertEqual(self.served(K3.port, image_chat(url), name)["usage"]["prompt_tokens"], want, name)
        for name, url in (("a character outside base64", "data:image/png;base64,@@@@" + b64),
                          ("data after the padding", "data:image/png;base64," + b64 + "QUJD"),
                          ("not an image type", "data:text/plain;base64," + b64)):
            with self.subTest(name):
                e = self.refused(K3.port, image_chat(url), 400, name)
                self.assertEqual(e["param"], "messages", name)

    def test_b_file_urls(self):
        base = "file://" + MEDIA + "/"
        self.served(K3.port, image_chat(base + "ok.png"), "a file in the folder")
        self.served(K3.port, image_chat(base + "..x.png"), "a file named ..x.png in the folder")
        self.served(K3.port, image_chat(base + "%2E%2Ex.png"), "..x.png percent-encoded")
        for name, url in (("%00 then ../", base + "ok.png%00/../x.png"), ("a trailing %00", base + "ok.png%00"),
                          ("a newline", base + "ok%0A.png")):
            with self.subTest(name):
                self.refused(K3.port, image_chat(url), 400, name, "control character")
        for name, url in (("../ out of the folder", base + "../outside/x.png"),
                          ("%2E%2E/ out of the folder", base + "%2E%2E/outside/x.png")):
            with self.subTest(name):
                self.refused(K3.port, image_chat(url), 400, name, "outside the allowed local media path")
        self.served(K3.port, chat_body(max_tokens=2), "and the server still serves")

    def test_c_bearer_scheme_any_case(self):
        srv = Server("--api-key", "k3y-Secret")
        try:
            for auth in ("Bearer k3y-Secret", "bearer k3y-Secret", "BEARER k3y-Secret", "bEaReR    k3y-Secret"):
                with self.subTest(auth=auth):
                    r = post(srv.port, "/v1/chat/completions", chat_body(max_tokens=2), headers={"Authorization": auth})
                    self.assertEqual(r.status, 200, r)
            for auth in ("bearer k3y-secret", "bearer k3y-Secret2", "bearer k3y-Secre", "bearerk3y-Secret",
                         "Basic k3y-Secret", "k3y-Secret", "bearer"):
                with self.subTest(auth=auth):
                    r = post(srv.port, "/v1/chat/completions", chat_body(max_tokens=2), headers={"Authorization": auth})
                    e = check_error(self, r, 401, None, auth)
                    self.assertEqual(e["code"], "invalid_api_key")
            # the key is checked before the body's type: no key and text/plain is a 401
            r = raw_post(srv.port, "/v1/completions", b"{}", {"Content-Type": "text/plain"})
            check_error(self, r, 401, None, "no key, text/plain")
        finally:
            srv.kill()

    def test_d_json_content_type_required(self):
        bodies = {"/v1/chat/completions": chat_body(max_tokens=2), "/v1/completions": completion_body(max_tokens=2),
                  "/tokenize": {"prompt": "hi"}, "/detokenize": {"tokens": [1, 2]}}
        for port in (hc.MAIN.port, K3.port):
            for path, body in bodies.items():
                data = json.dumps(body).encode()
                for ctype in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                              "multipart/form-data; boundary=x", "application/jsonx", "json", None, ""):
                    with self.subTest(port=port, path=path, ctype=ctype):
                        r = raw_post(port, path, data, {} if ctype is None else {"Content-Type": ctype})
                        e = check_error(self, r, 415, None, "%s %r" % (path, ctype))
                        self.assertEqual(e["code"], "unsupported_media_type")
                        self.assertIn("application/json", e["message"])
                for ctype in ("application/json", "application/json; charset=utf-8", "Application/JSON",
                              "application/json ;charset=UTF-8"):
                    with self.subTest(port=port, path=path, ctype=ctype):
                        r = raw_post(port, path, data, {"Content-Type": ctype})
                        self.assertEqual(r.status, 200, "%s %r: %r" % (path, ctype, r))
        # routes that are not POST routes keep their 404 / 405
        check_error(self, raw_post(hc.MAIN.port, "/nope", b"{}", {"Content-Type": "text/plain"}), 404)
        check_error(self, raw_post(hc.MAIN.port, "/v1/models", b"{}", {"Content-Type": "text/plain"}), 405)
        self.served(hc.MAIN.port, chat_body(max_tokens=2), "the server still serves")

    def test_e_unknown_role(self):
        for srv in (hc.MAIN, K3):
            for role in ("root", "System", "", "assistant "):
                msgs = [{"role": role, "content": "you are root"}, {"role": "user", "content": "hi"}]
                with self.subTest(port=srv.port, role=role):
                    e = self.refused(srv.port, chat_body(max_tokens=2, messages=msgs), 400, role)
                    self.assertEqual(e["param"], "messages")
                    self.assertIn("messages[0].role '%s'" % role, e["message"])
                    self.assertIn("allowed: system, developer, user, assistant, tool, function", e["message"])
                    e = self.refused(srv.port, {"messages": msgs}, 400, role, path="/tokenize")
                    self.assertIn("'%s'" % role, e["message"])
            for role in ("system", "developer"):
                msgs = [{"role": role, "content": "be brief"}, {"role": "user", "content": "hi"}]
                with self.subTest(port=srv.port, role=role):
                    self.served(srv.port, chat_body(max_tokens=2, messages=msgs), role)

    def test_f_mmap_file_truncated(self):
        d = tempfile.mkdtemp(prefix="kimi-http-mmap-")
        hc.TMPDIRS.append(d)
        srv = None
        try:
            model = os.path.join(d, "model")
            shutil.copytree(hc.MODEL_DIR, model)
            weights = sorted(os.path.join(model, f) for f in os.listdir(model) if f.endswith(".safetensors"))
            self.assertTrue(weights, os.listdir(model))
            srv = Server("--mmap", "--max-model-len", "256", model=model)
            self.served(srv.port, chat_body(max_tokens=2), "before the truncation")
            for w in weights:
                os.truncate(w, 0)
            try:
                post(srv.port, "/v1/chat/completions", chat_body(max_tokens=4, temperature=0), timeout=30)
            except (OSError, http.client.HTTPException):
                pass   # the server died under the request: expected
            rc = srv.proc.wait(30)
            for t in srv.readers:
                t.join(10)
            err = srv.stderr_text()
            self.assertGreater(rc, 0, "exit status %r (negative: killed by a signal)\n%s" % (rc, srv.log()))
            fatal = [ln for ln in err.splitlines() if "changed on disk while mapped" in ln]
            self.assertEqual(len(fatal), 1, err[-3000:])
            m = re.match(r"kimi-cpp: fatal: (.+?) changed on disk while mapped \(--mmap\): ", fatal[0])
            self.assertTrue(m, fatal[0])
            self.assertIn(os.path.realpath(m.group(1)), [os.path.realpath(w) for w in weights], fatal[0])
        finally:
            if srv is not None:
                srv.kill()
            shutil.rmtree(d, ignore_errors=True)

    def test_z_still_serving(self):
        time.sleep(0.1)
        self.served(hc.MAIN.port, chat_body(max_tokens=2), "MAIN")
        self.served(K3.port, chat_body(max_tokens=2), "K3")
