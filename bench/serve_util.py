"""Shared helpers of the `kimi-cpp serve` benchmarks (bench/prefix_cache.py, bench/structured_output.py).

Standard library only. Holds: Server (one `kimi-cpp serve` on --port 0, a KimiServer of
tests/common/kimi_server.py: its port read from its output, ready once /health is 200, stopped with
SIGTERM then SIGKILL) with serve_cmd and stop_all (kimi_server's, also run at exit);
the HTTP helpers request, server_version, metrics (the unlabelled /metrics samples), wait_idle and
sse_events; machine_info (/proc/cpuinfo + `kimi-cpp bench machine`); the command-line checks
check_inputs and exit_on_signals; and the report helpers order_for, fmt, quote, machine_line and
model_line. Functions that print or fail take `prog`, the calling script's name, which prefixes
their messages.
"""
import http.client
import json
import os
import shlex
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "common"))
import kimi_server  # noqa: E402
from kimi_server import KimiServer, ServerError  # noqa: E402

stop_all = kimi_server.stop_all      # stops every Server still running (also run at exit)


def log(prog, msg):
    print(f"{prog}: {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Servers
# ------------------------------------------------------------------------------------------------

def add_server_args(ap, threads_default, scope=""):
    """The flags that say which server to start (--kimi, --model, --served-model-name, --threads,
    --serve-args, --startup-timeout); scope is appended to the help of the shared ones."""
    ap.add_argument("--kimi", default="build/bin/kimi-cpp", help="the kimi-cpp binary")
    ap.add_argument("--model", default="models/bench", help="model directory (make it with kimi-cpp make-model --preset bench)")
    ap.add_argument("--served-model-name", dest="served_name", default="", help="default: the model directory's name" + scope)
    ap.add_argument("--threads", type=int, default=threads_default, help="server compute threads (0: its default)")
    ap.add_argument("--serve-args", default="", help="more `kimi-cpp serve` flags, one shell-quoted string" + scope)
    ap.add_argument("--startup-timeout", type=float, default=900.0, help="seconds for a server to load and report /health 200")


def serve_cmd(args, extra=()):
    """`kimi-cpp serve` of args.model on --port 0 as args.served_name, then extra, --threads (if set), --serve-args."""
    cmd = [args.kimi, "serve", "--model", args.model, "--port", "0", "--served-model-name", args.served_name]
    cmd += list(extra)
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    return cmd + shlex.split(args.serve_args)


class Server(KimiServer):
    """One `kimi-cpp serve` on --port 0 (tests/common/kimi_server.py: the port is read from its
    stderr), ready once /health is 200; a failed start stops it and exits with its output's tail."""

    def __init__(self, cmd, prog, startup_timeout):
        self.cmd = list(cmd)
        self.prog = prog
        try:
            super().__init__(self.cmd, timeout=startup_timeout)
        except ServerError as e:
            raise SystemExit(f"{prog}: server ({' '.join(self.cmd)}) {e.why}\n"
                             f"--- server output (tail) ---\n{self.log_tail()}")

    def log_tail(self):
        return self.output(tail_lines=200).rstrip("\n")

    def stop(self, timeout=60.0):
        """SIGTERM, then SIGKILL if it has not exited after timeout seconds."""
        super().stop(timeout)
        return self.proc.returncode


# ------------------------------------------------------------------------------------------------
# HTTP
# ------------------------------------------------------------------------------------------------

def request(port, method, path, body=None, timeout=3600.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def server_version(port):
    """The "version" of the server's /version."""
    return json.loads(request(port, "GET", "/version", timeout=30)[1]).get("version")


def metrics(port, prog):
    """{'name': value} of the unlabelled samples of /metrics (Prometheus text)."""
    status, data = request(port, "GET", "/metrics", timeout=60)
    if status != 200:
        raise SystemExit(f"{prog}: GET /metrics -> HTTP {status}")
    out = {}
    for ln in data.decode("utf-8", "replace").split("\n"):
        if not ln or ln.startswith("#") or "{" in ln:
            continue
        parts = ln.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return out


def wait_idle(port, prog, timeout=60.0):
    """The metrics once no request runs or waits (a stream's last bytes can precede the engine's bookkeeping)."""
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(port, prog)
        if (m.get("kimi:num_requests_running", 0) == 0 and m.get("kimi:num_requests_waiting", 0) == 0) \
                or time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def sse_events(resp):
    """The payloads of the `data: ...` events of a streamed response (comments skipped)."""
    while True:
        line = resp.readline()
        if not line:
            return
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if text.startswith("data:"):
            yield text[5:].strip()


# ------------------------------------------------------------------------------------------------
# Command line, machine, report
# ------------------------------------------------------------------------------------------------

def check_inputs(kimi, model, prog):
    """Exits with a hint when the kimi-cpp binary or the model directory is missing."""
    if not (os.path.isfile(kimi) and os.access(kimi, os.X_OK)):
        raise SystemExit(f"{prog}: {kimi}: no kimi-cpp binary there (build it: make build; or pass --kimi)")
    if not os.path.isfile(os.path.join(model, "config.json")):
        raise SystemExit(f"{prog}: {model}: no model there (no config.json); make one with\n"
                         f"  {kimi} make-model --out {model} --preset bench --seed 0")


def exit_on_signals(prog):
    """SIGTERM / SIGHUP end like Ctrl-C (a SystemExit), so the callers' finally stops the servers."""
    def on_signal(sig, _frame):
        raise SystemExit(f"{prog}: signal {sig}, stopping")
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)


def machine_info(kimi, tmp, prog):
    """CPU model and count, `kimi-cpp bench machine` (its JSON written into the directory tmp), load average."""
    info = {"cpu": None, "nproc": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    info["cpu"] = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    path = os.path.join(tmp, "machine.json")
    cmd = [kimi, "bench", "machine", "--size-mb", "256", "--reps", "3", "--quiet", "--json", path]
    log(prog, "machine: " + " ".join(cmd))
    res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if res.returncode == 0 and os.path.exists(path):
        with open(path) as f:
            info["bench_machine"] = json.load(f)
        info["cpu"] = info["bench_machine"].get("cpu") or info["cpu"]
    else:
        log(prog, f"bench machine failed ({res.returncode}); using /proc/cpuinfo only: {res.stderr.strip()[-300:]}")
    try:
        info["loadavg"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    return info


def order_for(modes, repeat):
    """The modes rotated by repeat (for two modes: as given, then reversed), so machine drift hits all of them."""
    k = repeat % len(modes)
    return modes[k:] + modes[:k]


def fmt(v, f="{:.1f}"):
    return "–" if v is None else f.format(v)


def quote(cmd):
    return " ".join(shlex.quote(str(c)) for c in cmd)


def machine_line(machine):
    """The report's `machine:` line: CPU, count, bench machine's threads and flags, load average (start, end)."""
    bm = machine.get("bench_machine") or {}
    return (f"machine: {machine.get('cpu') or '?'}; {machine.get('nproc')} CPUs"
            + (f", {bm.get('threads')} threads, {bm.get('cpu_flags', '')}" if bm else "")
            + (f"; load average at start {' '.join(machine['loadavg'])}" if machine.get("loadavg") else "")
            + (f", at end {' '.join(machine['loadavg_end'])}" if machine.get("loadavg_end") else ""))


def model_line(model, version, t_start, wall):
    """The report's `model:` line: model, server version, start time, the script's wall time."""
    return (f"model: {model}; kimi.cpp {version or ''}; {time.strftime('%Y-%m-%d %H:%M', time.localtime(t_start))}; "
            f"script wall time {wall:.0f} s")
