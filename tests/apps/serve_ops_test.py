#!/usr/bin/python3
"""A server you can operate, end to end on a random tiny model (standard library only):

  * `--help` on every command (exit 0, the flags it parses), a mistyped flag names the right one,
    errors carry no doubled prefix;
  * `serve MODEL` as a positional argument; the key from $KIMI_API_KEY and from --api-key-file;
    the startup hint's curl line works as pasted, with and without a key (run through sh);
  * the access log: one line per request with its tokens, --no-access-log; CORS with
    --allowed-origins (preflight allowed / refused) and none without it;
  * generation_config.json's sampling defaults (--generation-config auto | none);
  * a checkpoint whose vocab_size is larger than its tokenizer's (a padded vocabulary).

Run as: serve_ops_test.py --kimi build/bin/kimi-cpp [unittest args]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from kimi_server import KimiServer, READY_RE  # noqa: E402

KIMI = None
WORK = None
MODEL = None


def run(*args, env=None, timeout=120):
    p = subprocess.run([KIMI, *args], capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def request(port, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    out = (r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read())
    c.close()
    return out


def serve(*args, env=None, model=None):
    return KimiServer([KIMI, "serve", model or MODEL, "--port", "0", "--threads", "1", *args], env=env,
                      ready=READY_RE)


def chat(port, headers=None, **extra):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4, **extra}
    return request(port, "POST", "/v1/chat/completions", body, headers)


class Help(unittest.TestCase):
    def test_every_command_has_help(self):
        rc, out, _ = run("help")
        self.assertEqual(rc, 0)
        commands = re.findall(r"^  (\S+)\s", out, re.M)
        self.assertIn("serve", commands)
        subs = {"bench": ["decode", "serve", "machine", "model", "matmul", "vision", "tokenizer"],
                "eval": ["gsm8k", "compare"]}
        for c in commands:
            for argv in ([c, s, "--help"] for s in subs[c]) if c in subs else [[c, "--help"]]:
                rc, out, err = run(*argv)
                self.assertEqual(rc, 0, "%s: %s" % (argv, err))
                self.assertTrue(out.startswith("usage: kimi-cpp "), "%s: %r" % (argv, out[:200]))
                if c not in subs:
                    self.assertIn("--", out, argv)
        rc, out, _ = run("serve", "--help")
        for flag in ("MODEL", "--model", "--port", "--api-key-file", "--allowed-origins", "--log-level",
                     "--no-access-log", "--generation-config", "--responses-store-size", "--max-model-len",
                     "--threads"):
            self.assertIn(flag, out)
        self.assertIn("(default 8000; 0..65535)", out)
        rc, _, err = run("serve", MODEL, "--port", "70000")
        self.assertEqual(rc, 1)
        self.assertIn("--port must be in [0, 65535], got 70000", err)

    def test_typos_and_errors(self):
        rc, _, err = run("serve", MODEL, "--prot", "9")
        self.assertEqual(rc, 1)
        self.assertIn("did you mean --port?", err)
        rc, _, err = run("generate", "--model", MODEL, "--max-token", "3")
        self.assertIn("did you mean --max-tokens?", err)
        rc, _, err = run("serve")
        self.assertEqual(rc, 1)
        self.assertRegex(err, r"^kimi-cpp serve: error: [^:]*no model")
        self.assertNotIn("serve: error: serve:", err)


class Serve(unittest.TestCase):
    def test_positional_model_and_hint_without_key(self):
        srv = serve()
        try:
            out = srv.stdout_text()
            m = re.search(r"^  (curl .*\\\n.*)$", out, re.M)
            self.assertTrue(m, out)
            self.assertNotIn("Authorization", m.group(1))
            p = subprocess.run(["sh", "-c", m.group(1).replace("\\\n", " ") + " -s -o /dev/null -w '%{http_code}'"],
                               capture_output=True, timeout=60)
            self.assertEqual(p.stdout.decode(), "200")
        finally:
            srv.stop()

    def test_key_from_the_environment_and_a_file(self):
        env = dict(os.environ, KIMI_API_KEY="env-key-123")
        srv = serve(env=env)
        try:
            line = re.search(r"^  (curl .*\\\n.*)$", srv.stdout_text(), re.M).group(1)
            self.assertIn('"Authorization: Bearer $KIMI_API_KEY"', line)
            cmd = line.replace("\\\n", " ") + " -s -o /dev/null -w '%{http_code}'"
            ok = subprocess.run(["sh", "-c", cmd], capture_output=True, env=env, timeout=60)
            self.assertEqual(ok.stdout.decode(), "200", "the hint as pasted, with the key exported")
            bad = subprocess.run(["sh", "-c", cmd], capture_output=True, env=dict(env, KIMI_API_KEY="nope"), timeout=60)
            self.assertEqual(bad.stdout.decode(), "401")
            self.assertEqual(chat(srv.port, {"x-api-key": "env-key-123"})[0], 200)
        finally:
            srv.stop()
        key_file = os.path.join(WORK, "key")
        with open(key_file, "w") as f:
            f.write("file-key-456\n")
        env = {k: v for k, v in os.environ.items() if k != "KIMI_API_KEY"}
        srv = serve("--api-key-file", key_file, env=env)
        try:
            self.assertIn("export KIMI_API_KEY=", srv.stdout_text())
            self.assertEqual(chat(srv.port)[0], 401)
            self.assertEqual(chat(srv.port, {"Authorization": "Bearer file-key-456"})[0], 200)
        finally:
            srv.stop()

    def test_access_log_and_cors(self):
        srv = serve("--allowed-origins", "http://app.example")
        try:
            self.assertEqual(chat(srv.port)[0], 200)
            self.assertEqual(request(srv.port, "GET", "/v1/nope")[0], 404)
            line = srv.wait_line(r"access: \S+ POST /v1/chat/completions 200 prompt=\d+ cached=\d+ completion=4 ttft=",
                                 timeout=10)
            self.assertTrue(line)
            srv.wait_line(r"access: \S+ GET /v1/nope 404 ", timeout=10)
            st, h, _ = request(srv.port, "OPTIONS", "/v1/chat/completions", None,
                               {"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
                                "Access-Control-Request-Headers": "content-type"})
            self.assertEqual(st, 200)
            self.assertEqual(h.get("access-control-allow-origin"), "http://app.example")
            self.assertIn("POST", h.get("access-control-allow-methods", ""))
            st, h, _ = request(srv.port, "OPTIONS", "/v1/chat/completions", None,
                               {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
            self.assertEqual(st, 400)
            self.assertNotIn("access-control-allow-origin", h)
            st, h, _ = chat(srv.port, {"Origin": "http://app.example"})
            self.assertEqual(h.get("access-control-allow-origin"), "http://app.example")
        finally:
            srv.stop()
        srv = serve("--no-access-log")
        try:
            st, h, _ = chat(srv.port, {"Origin": "http://app.example"})
            self.assertEqual(st, 200)
            self.assertNotIn("access-control-allow-origin", h, "no CORS without --allowed-origins")
            self.assertEqual(request(srv.port, "OPTIONS", "/v1/chat/completions", None,
                                     {"Origin": "http://app.example", "Access-Control-Request-Method": "POST"})[0], 405)
        finally:
            srv.stop()
        self.assertFalse([l for l in srv.err if l.startswith("access:")], "--no-access-log")

    def test_generation_config_defaults(self):
        gen = os.path.join(WORK, "gen")
        shutil.copytree(MODEL, gen)
        with open(os.path.join(gen, "generation_config.json"), "w") as f:
            json.dump({"temperature": 0.0, "max_new_tokens": 5}, f)
        body = {"model": "gen", "prompt": "Once upon a time", "ignore_eos": True}
        srv = serve(model=gen)
        try:
            # stderr is read on its own thread: wait for the line rather than reading it at once
            srv.wait_line(r"sampling defaults from generation_config\.json", timeout=10, stream="err")
            a = json.loads(request(srv.port, "POST", "/v1/completions", body)[2])
            b = json.loads(request(srv.port, "POST", "/v1/completions", body)[2])
            self.assertEqual(a["usage"]["completion_tokens"], 5, "max_new_tokens is the default max_tokens")
            self.assertEqual(a["choices"][0]["text"], b["choices"][0]["text"], "temperature 0 from the file")
            c = json.loads(request(srv.port, "POST", "/v1/completions", dict(body, max_tokens=7))[2])
            self.assertEqual(c["usage"]["completion_tokens"], 7, "the request's own value wins")
        finally:
            srv.stop()
        srv = serve("--generation-config", "none", model=gen)
        try:
            a = json.loads(request(srv.port, "POST", "/v1/completions", body)[2])
            self.assertEqual(a["usage"]["completion_tokens"], 16, "OpenAI's default max_tokens for completions")
        finally:
            srv.stop()

    def test_padded_vocabulary(self):
        padded = os.path.join(WORK, "padded")
        subprocess.run([KIMI, "make-model", "--preset", "tiny", "--seed", "1", "--out", padded, "--quiet",
                        "--set", "vocab_size=1344"], check=True, capture_output=True)
        srv = serve("--tokenizer", MODEL, model=padded)   # 1024 base tokens + 256 specials < 1344 rows
        try:
            st, _, body = request(srv.port, "POST", "/v1/completions",
                                  {"model": "padded", "prompt": "hi", "max_tokens": 40, "ignore_eos": True, "seed": 1})
            self.assertEqual(st, 200, body)
            self.assertEqual(json.loads(body)["usage"]["completion_tokens"], 40)
        finally:
            srv.stop()


def main():
    global KIMI, WORK, MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--kimi", required=True)
    args, rest = ap.parse_known_args()
    KIMI = os.path.abspath(args.kimi)
    WORK = tempfile.mkdtemp(prefix="kimi-serve-ops-")
    try:
        MODEL = os.path.join(WORK, "tiny")
        subprocess.run([KIMI, "make-model", "--preset", "tiny", "--seed", "1", "--out", MODEL, "--quiet"], check=True,
                       capture_output=True)
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
        ok = prog.result.wasSuccessful()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
