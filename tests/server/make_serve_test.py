#!/usr/bin/python3
"""`make serve` as a new user runs it (standard library only).

    /usr/bin/python3 tests/server/make_serve_test.py --repo /path/to/kimi.cpp --build-dir /path/to/build

Runs `make serve PORT=<a free port>` in --repo, in its own process group (the Makefile checks
the Debian packages, builds — fast when already built —, and starts the server on the committed
default model, models/kimi-k3-mini, as 'kimi-k3-mini'), then:
  * waits (up to --timeout s, the build may be needed) for GET /health 200 on that port;
  * checks stdout printed the URL banner and a curl example, and runs that example's request
    (its JSON body, sent with http.client) plus one chat completion with max_tokens 16, and asks
    "What is 37 + 45?" greedily: the content is 82, the reasoning in reasoning_content;
  * sends SIGINT to the process group, waits for make to end (make may exit non-zero after an
    interrupt) and checks that no process of the group (kimi-cpp above all) is left.
Exits non-zero on failure; whatever is left of the process group is killed in any case.
"""
import argparse
import json
import os
import re
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_common import request  # noqa: E402
from kimi_server import KimiServer, ServerError  # noqa: E402  (tests/common, put on sys.path by http_common)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_pids(pgid):
    """Live (non-zombie) processes whose process group is pgid, as {pid: command line}."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            state, pgrp = fields[0], int(fields[2])
            if pgrp != pgid or state == "Z":
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            out[int(d)] = cmd
        except (OSError, ValueError, IndexError):
            continue
    return out


def http_request(port, method, path, body=None, timeout=60):
    """(status, body bytes) of one request on a fresh connection; body: a dict sent as JSON."""
    r = request(port, method, path, body, timeout=timeout)
    return r.status, r.body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="the kimi.cpp checkout (where the Makefile is)")
    ap.add_argument("--build-dir", default=None, help="the CMake build directory (default REPO/build)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for /health 200")
    args = ap.parse_args()

    repo = os.path.abspath(args.repo)
    if not os.path.isfile(os.path.join(repo, "Makefile")):
        sys.exit("no Makefile in %s" % repo)
    port = free_port()
    cmd = ["make", "--no-print-directory", "serve", "PORT=%d" % port]
    if args.build_dir and os.path.realpath(args.build_dir) != os.path.realpath(os.path.join(repo, "build")):
        cmd.append("BUILD=%s" % os.path.abspath(args.build_dir))
    env = dict(os.environ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SERVE_ARGS", "HOST", "MODEL_DIR", "BUILD"):
        env.pop(k, None)       # as a new user's shell: no leftovers from a calling make or ctest
    print("make_serve_test: %s (in %s)" % (" ".join(cmd), repo), flush=True)

    t0 = time.monotonic()
    srv = None
    failures = []

    def log():
        return ("--- make stdout ---\n%s--- make stderr ---\n%s" % (srv.stdout_text()[-6000:], srv.stderr_text()[-6000:]))

    def fail(msg):
        failures.append(msg)
        print("FAIL: " + msg, flush=True)

    try:
        # 1. kimi-cpp's listening line (through make's stderr), then /health 200 on it, within the
        # timeout; in a new session: make leads its own process group, signalled and killed as a group
        try:
            srv = KimiServer(cmd, cwd=repo, env=env, timeout=args.timeout, wait_ready=False, new_session=True)
            srv.wait_ready(max(1.0, args.timeout - (time.monotonic() - t0)))
        except ServerError as e:
            raise AssertionError("no GET /health 200 on port %d after %.0f s (make rc %r): %s\n%s" %
                                 (port, time.monotonic() - t0, srv and srv.proc.poll(), e.why,
                                  log() if srv else e.log))
        pgid = srv.proc.pid      # make's process group
        t_ready = time.monotonic() - t0
        if srv.port != port:
            fail("kimi-cpp listens on port %d, want %d (PORT=)" % (srv.port, port))
        print("make_serve_test: /health 200 after %.1f s" % t_ready, flush=True)
        if json.loads(srv.ready_match) != {"status": "ok"}:
            fail("/health body %r" % srv.ready_match)

        # 2. the banner: the URL and a curl example (printed once ready; give it a moment)
        url = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 10
        while "curl " not in srv.stdout_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = srv.stdout_text()
        m = re.search(r"kimi\.cpp \S+ serving '([^']*)' at (http://\S+)", text)
        if not m:
            fail("stdout has no 'kimi.cpp ... serving ... at URL' line\n" + log())
        else:
            if m.group(1) != "kimi-k3-mini":
                fail("served model name %r, want 'kimi-k3-mini'" % m.group(1))
            if m.group(2) != url:
                fail("banner URL %r, want %r" % (m.group(2), url))
        cm = re.search(r"curl (\S+) .*?-d '(\{.*?\})'", text, re.S)
        if not cm:
            fail("stdout has no curl example\n" + log())
        else:
            if cm.group(1) != url + "/v1/chat/completions":
                fail("the curl example posts to %r, want %r" % (cm.group(1), url + "/v1/chat/completions"))
            try:
                example = json.loads(cm.group(2))
            except ValueError as e:
                fail("the curl example's body is not JSON (%s): %r" % (e, cm.group(2)))
                example = None
            if example is not None:
                status, body = http_request(port, "POST", "/v1/chat/completions", example)
                if status != 200:
                    fail("the curl example's request: HTTP %d %r" % (status, body[:300]))
                else:
                    j = json.loads(body)
                    if not j.get("choices"):
                        fail("the curl example's answer has no choices: %r" % body[:300])
        # 3. one chat completion as the README shows it, and a question the model was trained for
        status, body = http_request(port, "POST", "/v1/chat/completions",
                                    {"model": "kimi-k3-mini", "messages": [{"role": "user", "content": "What is 37 + 45?"}],
                                     "temperature": 0})
        if status != 200:
            fail("What is 37 + 45?: HTTP %d %r" % (status, body[:300]))
        else:
            msg = json.loads(body)["choices"][0]["message"]
            if msg.get("content") != "82" or "ones" not in (msg.get("reasoning_content") or ""):
                fail("What is 37 + 45?: %r" % msg)
        status, body = http_request(port, "POST", "/v1/chat/completions",
                                    {"model": "kimi-k3-mini", "messages": [{"role": "user", "content": "Hello!"}],
                                     "max_tokens": 16})
        if status != 200:
            fail("chat completion: HTTP %d %r" % (status, body[:300]))
        else:
            j = json.loads(body)
            ch = j.get("choices") or []
            if len(ch) != 1 or not isinstance(ch[0].get("message", {}).get("content"), str):
                fail("chat completion without a choice: %r" % body[:300])
            elif ch[0].get("finish_reason") not in ("stop", "length"):
                fail("finish_reason %r" % ch[0].get("finish_reason"))
            elif not (1 <= j["usage"]["completion_tokens"] <= 16):
                fail("completion_tokens %r for max_tokens 16" % j["usage"]["completion_tokens"])
            if j.get("model") != "kimi-k3-mini":
                fail("model %r" % j.get("model"))
        status, body = http_request(port, "GET", "/v1/models")
        if status != 200 or json.loads(body)["data"][0]["id"] != "kimi-k3-mini":
            fail("/v1/models: HTTP %d %r" % (status, body[:300]))

        # 4. Ctrl-C: SIGINT to the whole group; make and kimi-cpp end
        before = group_pids(pgid)
        servers = {p: c for p, c in before.items() if "kimi-cpp" in c and " serve" in c}
        if not servers:
            fail("no kimi-cpp serve process in make's process group: %r" % before)
        t_int = time.monotonic()
        srv.send(signal.SIGINT)    # to the whole group
        rc = srv.wait(30)
        if rc is not None:
            print("make_serve_test: make exited %d %.1f s after SIGINT" % (rc, time.monotonic() - t_int), flush=True)
        else:
            fail("make still running 30 s after SIGINT\n" + log())
        deadline = time.monotonic() + 15
        left = {p: c for p, c in group_pids(pgid).items() if p in before}
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = {p: c for p, c in group_pids(pgid).items() if p in before}
        if left:
            fail("processes left %.0f s after SIGINT: %r" % (time.monotonic() - t_int, left))
        for p in servers:
            if os.path.exists("/proc/%d" % p) and p in group_pids(pgid):
                fail("kimi-cpp (pid %d) still running after SIGINT" % p)
        if "serve: stopped" not in srv.stderr_text():
            fail("kimi-cpp did not report a clean stop ('serve: stopped') after SIGINT\n" + log())
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            fail("port %d still accepts connections after SIGINT" % port)
        except OSError:
            pass
    except AssertionError as e:
        fail(str(e))
    finally:
        if srv is not None:
            srv.kill()             # SIGKILL of whatever is left of the process group

    dt = time.monotonic() - t0
    if failures:
        print("make_serve_test: FAILED (%d) in %.1f s" % (len(failures), dt), flush=True)
        sys.exit(1)
    print("make_serve_test: OK in %.1f s" % dt, flush=True)


if __name__ == "__main__":
    main()
