"""Starting and stopping `kimi-cpp serve` in the Python tests and benchmarks (standard library only).

One class, KimiServer, for any command that ends up running `kimi-cpp serve`: the binary itself,
`mpirun ... kimi-cpp serve ...` or `make serve ...`. It
  * starts the command (stdin /dev/null; optionally in a new session, i.e. its own process group,
    and under an RLIMIT_AS) and pumps its stdout and stderr into line lists on two threads;
  * reads the port from the server's `serve: listening on http://127.0.0.1:PORT` line (stderr);
  * waits until it is ready: GET /health answers 200 (ready="health"), or its stdout prints a line
    matching a regex (e.g. READY_RE, the `kimi.cpp VERSION serving 'NAME' at URL` banner);
  * offers wait_line(regex), the captured output, send(sig), wait(timeout), stop(timeout)
    (SIGTERM, wait, then SIGKILL) and kill();
  * registers every server in a module list; stop_all() (run at exit by atexit) stops whatever is
    left, so that no server outlives a failing test.
With new_session=True (mpirun, make) signals go to the whole process group, and stop() / kill()
end with a SIGKILL of the group, so that no child (an MPI rank, make's kimi-cpp) is left behind.

Import it by putting this directory on sys.path, relative to the caller's own file:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from kimi_server import KimiServer
"""
import atexit
import http.client
import os
import re
import resource
import signal
import subprocess
import threading
import time

# `serve` prints this on stderr as soon as it listens (before the model is loaded) ...
LISTEN_RE = re.compile(r"serve: listening on http://127\.0\.0\.1:(\d+)")
# ... and this banner on stdout once it is ready (groups: version, served model name, port).
READY_RE = re.compile(r"kimi\.cpp (\S+) serving '([^']*)' at http://127\.0\.0\.1:(\d+)")

_SERVERS = []                    # every server not yet stopped (stop_all's list)
_SERVERS_LOCK = threading.Lock()


class ServerError(AssertionError):
    """A server that exited or timed out while being waited for; why: the reason, log: its output."""

    def __init__(self, why, log):
        super().__init__("server %s\n%s" % (why, log))
        self.why = why
        self.log = log


class KimiServer:
    """One server process (argv: any command running `kimi-cpp serve`, on --port 0 or a fixed port).

    env: the whole environment (None: this process's); cwd: its working directory; timeout: seconds
    for each of the listening line and readiness; wait_ready=False returns once the port is known
    (call wait_ready() later); address_space: an RLIMIT_AS in bytes; new_session: run in a new
    session (own process group), signalled as a group; ready: "health" or a regex for a stdout line.
    If the listening line or readiness does not come, the process is killed and ServerError raised.

    Attributes: argv, proc (the Popen), port, url, out / err (the stdout / stderr lines so far,
    newline included), lines (both, in arrival order), cond (the condition guarding them),
    ready_match (the match of the ready regex, or the /health body).
    """

    def __init__(self, argv, env=None, timeout=60.0, wait_ready=True, address_space=None, cwd=None,
                 new_session=False, ready="health"):
        self.argv = [str(a) for a in argv]
        self.new_session = new_session
        self.ready = re.compile(ready) if isinstance(ready, str) and ready != "health" else ready
        self.out, self.err, self.lines = [], [], []
        self._streams = {"out": self.out, "err": self.err}
        self._eof = {"out": False, "err": False}
        self.cond = threading.Condition()
        self.port = None
        self.ready_match = None
        # address_space: an RLIMIT_AS in bytes, so that memory runs out at a known size
        limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))) if address_space else None
        self.proc = subprocess.Popen(self.argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, preexec_fn=limit, start_new_session=new_session)
        with _SERVERS_LOCK:
            _SERVERS.append(self)
        self.readers = [threading.Thread(target=self._pump, args=(self.proc.stdout, "out"), daemon=True),
                        threading.Thread(target=self._pump, args=(self.proc.stderr, "err"), daemon=True)]
        for t in self.readers:
            t.start()
        try:
            self.port = int(self._wait_line(LISTEN_RE, timeout, "err").group(1))
            if wait_ready:
                self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise

    # -------------------------------------------------------------------------------- output

    def _pump(self, f, name):
        lines = self._streams[name]
        for raw in iter(f.readline, b""):
            line = raw.decode("utf-8", "replace")
            with self.cond:
                lines.append(line)
                self.lines.append(line)
                self.cond.notify_all()
        f.close()
        with self.cond:
            self._eof[name] = True
            self.cond.notify_all()

    def _wait_line(self, regex, timeout, stream=None):
        if isinstance(regex, str):
            regex = re.compile(regex)
        names = ("out", "err") if stream is None else (stream,)
        seen = dict.fromkeys(names, 0)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for n in names:
                    lines = self._streams[n]
                    while seen[n] < len(lines):
                        m = regex.search(lines[seen[n]])
                        seen[n] += 1
                        if m:
                            return m
                if all(self._eof[n] for n in names):
                    try:
                        rc = self.proc.wait(2)     # the output ended: the exit is a moment away
                    except subprocess.TimeoutExpired:
                        rc = None
                    raise ServerError("exited (rc %r) before printing %r" % (rc, regex.pattern), self.log())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerError("did not print %r within %.0f s" % (regex.pattern, timeout), self.log())
                self.cond.wait(min(left, 0.5))

    def wait_line(self, regex, timeout=60.0, stream=None):
        """The match of the first line (printed so far or later) matching regex; stream: "out",
        "err" or None (both). ServerError if the stream ends or timeout seconds pass first."""
        return self._wait_line(regex, timeout, stream)

    def stdout_text(self):
        with self.cond:
            return "".join(self.out)

    def stderr_text(self):
        with self.cond:
            return "".join(self.err)

    def output(self, tail_lines=None):
        """stdout and stderr interleaved in arrival order (the last tail_lines lines)."""
        with self.cond:
            return "".join(self.lines[-tail_lines:] if tail_lines else self.lines)

    def log(self, limit=6000):
        """The output for a failure message: stdout, then stderr, the last limit characters."""
        with self.cond:
            return ("--- server stdout ---\n" + "".join(self.out) + "--- server stderr ---\n" + "".join(self.err))[-limit:]

    # -------------------------------------------------------------------------------- readiness

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _health(self, timeout):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("GET", "/health")
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def wait_ready(self, timeout=60.0):
        """Waits for readiness (see ready) and returns ready_match: the regex's match, or the body of
        the first GET /health 200. ServerError if the server exits or timeout seconds pass first."""
        if self.ready != "health":
            self.ready_match = self._wait_line(self.ready, timeout, "out")
            return self.ready_match
        deadline = time.monotonic() + timeout
        last = None
        while True:
            if self.proc.poll() is not None:
                raise ServerError("exited with code %r before GET /health answered 200" % self.proc.returncode, self.log())
            try:
                status, body = self._health(10)
                if status == 200:
                    self.ready_match = body
                    return body
                last = "HTTP %d %r" % (status, body[:200])
            except (OSError, http.client.HTTPException) as e:
                last = repr(e)
            if time.monotonic() > deadline:
                raise ServerError("GET /health not 200 within %.0f s (last: %s)" % (timeout, last), self.log())
            time.sleep(0.2)

    # -------------------------------------------------------------------------------- process

    def alive(self):
        return self.proc.poll() is None

    def _signal_group(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass                 # the group is gone

    def send(self, sig):
        """Sends sig to the process (to its process group with new_session)."""
        if self.new_session:
            self._signal_group(sig)
        elif self.alive():
            self.proc.send_signal(sig)

    def wait(self, timeout):
        """The exit code, or None if still running after timeout seconds. Once it has exited, the
        output is read to its end (the reader threads joined) before this returns."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._join_readers()
        return rc

    def _join_readers(self):
        for t in self.readers:
            if t is not threading.current_thread():
                t.join(2)

    def _forget(self):
        if self.proc.poll() is not None:
            with _SERVERS_LOCK:
                if self in _SERVERS:
                    _SERVERS.remove(self)

    def _stop(self, timeout=15.0, sig=signal.SIGTERM):
        self.send(sig)
        rc = self.wait(timeout)
        if rc is None or self.new_session:
            self.kill()          # what is left of the group goes too
        else:
            self._forget()
        return rc

    def stop(self, timeout=15.0, sig=signal.SIGTERM):
        """sig (SIGTERM), then the exit code; None if it had not exited after timeout seconds and
        was killed (SIGKILL)."""
        return self._stop(timeout, sig)

    def kill(self):
        """SIGKILL (of the process group with new_session) and waits for the exit; harmless when
        the process has already exited."""
        if self.new_session:
            self._signal_group(signal.SIGKILL)
        elif self.alive():
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._join_readers()
        self._forget()


def stop_all(timeout=15.0):
    """Stops every server still registered: stop(timeout), or at once (kill) when timeout <= 0.
    Registered with atexit, so a failing test leaves no server behind."""
    with _SERVERS_LOCK:
        servers = list(_SERVERS)
    for s in servers:
        try:
            if timeout and timeout > 0:
                s._stop(timeout)
            else:
                KimiServer.kill(s)
        except BaseException:
            try:
                KimiServer.kill(s)
            except BaseException:
                pass


atexit.register(stop_all)
