#!/usr/bin/python3
"""`kimi-cpp generate` over MPI: the same greedy tokens (f32) from one process and from
`mpirun -np 2` and `-np 3` (heads split unevenly), with tensor and with expert parallelism (bf16:
runs); `serve` under `mpirun -np 2` answers a completion with the one-process text; `bench decode
--ab` under `mpirun -np 2` keeps the direct-output counters (0 copies, 0 allocations); `score`
under mpirun is within 1e-5 of one process, and the same bits whatever the chunking, the threads
per rank and the batch around it; `serve` under `mpirun -np 2` with rank 1 killed mid-stream answers
the stream with an error event naming the rank and exits 1 within seconds; and the clear
errors: --tensor-parallel-size without a matching MPI job.

    /usr/bin/python3 tests/dist/mpi_cli_test.py --kimi build/bin/kimi-cpp --mpirun /usr/bin/mpiexec
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from kimi_server import KimiServer, ServerError  # noqa: E402

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def start_serving(cmd):
    """A starting `serve` (any command: mpirun ... serve too) in its own process group, once
    /health is 200 (within 120 s); signalled and stopped as a group."""
    return KimiServer(cmd, env=ENV, timeout=120, new_session=True)


def serve_once(cmd, body):
    """Starts a server, sends one completion, stops it (SIGTERM); the completion's text."""
    try:
        srv = start_serving(cmd)
    except ServerError:
        return None
    try:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        out = json.loads(r.read())
        c.close()
        return out["choices"][0]["text"] if r.status == 200 else None
    finally:
        srv.stop(60)


def rank_pids(root_pid):
    """{rank: pid} of the kimi-cpp processes under mpirun (read from their environment)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK" in env and "kimi-cpp" in stat:
            # a descendant of this mpirun (its session)
            if os.getsid(int(d)) == os.getsid(root_pid):
                out[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(d)
    return out


def serve_kill_follower(cmd, body):
    """Starts `mpirun -np 2 ... serve`, opens a long stream, kills rank 1 (SIGKILL) mid-stream.
    Returns (the stream's last data events, rank 0's stderr, mpirun's exit code, seconds to exit)."""
    try:
        srv = start_serving(cmd)
    except ServerError as e:
        return None, e.log, None, 0
    try:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        events = []
        for _ in range(5):   # a few tokens in
            events.append(r.readline())
        pids = rank_pids(srv.proc.pid)
        if 1 not in pids:
            return None, "no rank 1 found: %r" % pids, None, 0
        os.kill(pids[1], signal.SIGKILL)
        t0 = time.monotonic()
        try:
            while True:
                line = r.readline()
                if not line:
                    break
                if line.startswith(b"data: "):
                    events.append(line)
        except (OSError, http.client.HTTPException):
            pass
        c.close()
        rc = srv.wait(30)    # once exited, its stderr has been read to the end
        took = time.monotonic() - t0
        return [e for e in events if e.startswith(b"data: ")][-3:], srv.stderr_text(), rc, took
    finally:
        srv.kill()           # SIGKILL of what is left of the group


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--mpirun", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kimi-mpi-cli-")
    failures = []

    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what, flush=True)
        if not cond:
            failures.append(what)

    def run(cmd, timeout=300):
        p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    try:
        for preset, sets in (("tiny", ["linear_attn_config.num_heads=4", "num_attention_heads=5"]),
                             ("k3-tiny", ["text_config.linear_attn_config.num_heads=4", "text_config.num_attention_heads=5"])):
            model = os.path.join(tmp, preset)
            cmd = [a.kimi, "make-model", "--out", model, "--preset", preset, "--seed", "3"]
            for s in sets:
                cmd += ["--set", s]
            rc, _, err = run(cmd)
            check(rc == 0, "make-model %s: %s" % (preset, err.strip()[-200:]))
            for dtype in ("f32", "bf16"):
                gen = [a.kimi, "generate", "--model", model, "--prompt", "The quick brown fox jumps over the lazy dog",
                       "-n", "12", "--temperature", "0", "--ignore-eos", "--activation-dtype", dtype, "--json", "--quiet"]
                rc, out, err = run(gen)
                check(rc == 0, "%s %s alone" % (preset, dtype))
                want = json.loads(out)["token_ids"] if rc == 0 else None
                for n in (2, 3):
                    for extra in ([], ["--enable-expert-parallel"]):
                        rc, out, err = run([a.mpirun, "-np", str(n), "--oversubscribe"] + gen + extra)
                        got = json.loads(out)["token_ids"] if rc == 0 and out.strip() else None
                        what = "%s %s mpirun -np %d%s: the same tokens as one process" % (preset, dtype, n, " " + extra[0] if extra else "")
                        if dtype == "f32":
                            check(got == want, what + ("" if got == want else ": %r vs %r %s" % (got, want, err[-300:])))
                        else:   # bf16 rounds partial sums: the tokens may differ, the run must work
                            check(rc == 0 and got is not None and len(got) == 12, what.replace("the same tokens as", "runs like"))
        # speculative decoding split over ranks: the state captures and the rollback copies travel
        # with the step messages; the tokens equal one process decoding plainly
        spec = ["--speculative-config",
                '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 2}']
        for preset in ("tiny", "k3-tiny"):
            gen = [a.kimi, "generate", "--model", os.path.join(tmp, preset), "--tokens", "5,9,13,5,9,13,5,9,13",
                   "--max-tokens", "30", "--temperature", "0", "--ignore-eos", "--logit-bias", "3=40", "--logit-bias",
                   "17=40", "--logit-bias", "29=40", "--activation-dtype", "f32", "--json", "--quiet"]
            rc, out, err = run(gen)
            want = json.loads(out)["token_ids"] if rc == 0 else None
            rc, out, err = run([a.mpirun, "-np", "2", "--oversubscribe"] + gen + spec)
            sd = json.loads(out)["spec_decode"] if rc == 0 and out.strip() else {}
            got = json.loads(out)["token_ids"] if rc == 0 and out.strip() else None
            check(0 < sd.get("num_accepted_tokens", 0) < sd.get("num_draft_tokens", 0),
                  "%s mpirun -np 2 with --speculative-config: drafts accepted and rejected (%r)" % (preset, sd))
            check(want is not None and got == want,
                  "%s mpirun -np 2 with --speculative-config: the tokens of one plain process (%r vs %r %s)" %
                  (preset, got, want, err[-300:]))
        model = os.path.join(tmp, "tiny")
        body = {"model": "m", "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0, "ignore_eos": True}
        texts = [serve_once([a.kimi, "serve", "--model", model, "--served-model-name", "m", "--port", "0",
                             "--activation-dtype", "f32"], body)]
        texts.append(serve_once([a.mpirun, "-np", "2", "--oversubscribe", a.kimi, "serve", "--model", model,
                                 "--served-model-name", "m", "--port", "0", "--activation-dtype", "f32"], body))
        check(texts[0] is not None and texts[0] == texts[1], "serve under mpirun -np 2: the one-process text (%r vs %r)" % tuple(texts))
        # a follower dies mid-stream: rank 0 answers the stream with a 503 error event, reports
        # unhealthy and exits 1 naming the lost rank (instead of hanging in a collective)
        events, err, rc, took = serve_kill_follower(
            [a.mpirun, "-np", "2", "--oversubscribe", a.kimi, "serve", "--model", model, "--served-model-name", "m",
             "--port", "0"], dict(body, max_tokens=3000, stream=True))
        last = b"".join(events or [])
        check(events is not None and b"engine_error" in last and b"MPI rank 1 of 2" in last and b"[DONE]" in last,
              "serve under mpirun -np 2, rank 1 killed mid-stream: an error event naming the rank, then [DONE] (%r)" % last[-300:])
        check(rc is not None and rc != 0 and took < 10 and "serve: the engine failed" in err and "exit code 1" in err,
              "... and rank 0 exits with a message instead of hanging (rc %r after %.1f s): %s" % (rc, took, err.strip()[-300:]))
        # the direct-output contract under MPI: no copy and no allocation per decode step in
        # direct mode, one copy per layer in copy mode (bench decode --ab, both engines split)
        out_json = os.path.join(tmp, "decode.json")
        rc, _, err = run([a.mpirun, "-np", "2", "--oversubscribe", a.kimi, "bench", "decode", "--model", model, "--ab",
                          "--runs", "1", "--warmup", "0", "--output-len", "8", "--threads", "1", "--quiet", "--json", out_json])
        ok = rc == 0 and os.path.exists(out_json)
        v = json.load(open(out_json))["variants"] if ok else {}
        layers = json.load(open(os.path.join(model, "config.json")))["num_hidden_layers"]
        check(ok and v["direct"]["attn_output_copies_per_step"] == 0 and v["direct"]["allocations_per_step"] == 0
              and v["copy"]["attn_output_copies_per_step"] == layers,
              "bench decode --ab under mpirun -np 2: direct 0 copies / 0 allocations per step, copy %d: %s" %
              (layers, {k: (x["attn_output_copies_per_step"], x["allocations_per_step"]) for k, x in v.items()} if ok else err[-300:]))
        # score: every rank drives the same steps; the logits of every position within 1e-5 of
        # one process, and the same bits whatever the chunking (batch/chunk invariance holds split)
        ids = ",".join(str(7 + (i * 37) % 900) for i in range(40))
        outs = {}
        for tag, pre, extra in (("alone", [], []), ("np2", [a.mpirun, "-np", "2", "--oversubscribe"], []),
                                ("np2c7", [a.mpirun, "-np", "2", "--oversubscribe"], ["--prefill-chunk", "7"]),
                                ("np2t1", [a.mpirun, "-np", "2", "--oversubscribe"], ["--threads", "1"]),
                                ("np2f3", [a.mpirun, "-np", "2", "--oversubscribe"], ["--batch-filler", "3", "--prefill-chunk", "5"]),
                                ("np3", [a.mpirun, "-np", "3", "--oversubscribe"], ["--batch-filler", "2"])):
            path = os.path.join(tmp, tag + ".bin")
            rc, _, err = run(pre + [a.kimi, "score", "--model", os.path.join(tmp, "k3-tiny"), "--tokens", ids, "--out", path,
                                    "--activation-dtype", "f32"] + extra)
            outs[tag] = open(path, "rb").read() if rc == 0 and os.path.exists(path) else None
            check(outs[tag] is not None, "score %s" % tag + ("" if outs[tag] is not None else ": " + err.strip()[-200:]))
        if all(outs.values()):
            import numpy as np
            ref = np.frombuffer(outs["alone"], dtype=np.float32)
            for tag in ("np2", "np3"):
                rel = float(np.abs(np.frombuffer(outs[tag], dtype=np.float32) - ref).max() / np.abs(ref).max())
                check(rel <= 1e-5, "score %s within 1e-5 of one process (max-rel %.2e)" % (tag, rel))
            check(outs["np2"] == outs["np2c7"] == outs["np2t1"] == outs["np2f3"],
                  "score under mpirun -np 2: the same bits with 7-token chunks, 1 thread a rank, 3 batch fillers in 5-token chunks")
        # eval gsm8k --ab: two engines one after the other, the one-process responses in both
        ev = [a.kimi, "eval", "gsm8k", "--model", model, "--limit", "3", "--num-shots", "1", "--max-tokens", "12",
              "--activation-dtype", "f32", "--quiet"]
        rc1, _, _ = run(ev + ["--out", os.path.join(tmp, "ev1.jsonl")])
        rc2, _, err = run([a.mpirun, "-np", "2", "--oversubscribe"] + ev + ["--ab", "--out", os.path.join(tmp, "ev2.jsonl")])
        resp = lambda f: [json.loads(l)["response"] for l in open(os.path.join(tmp, f))]
        check(rc1 == 0 and rc2 == 0 and resp("ev1.jsonl") == resp("ev2.direct.jsonl") == resp("ev2.copy.jsonl"),
              "eval gsm8k --ab under mpirun -np 2: the one-process responses" + ("" if rc2 == 0 else ": " + err[-200:]))
        rc, out, err = run([a.mpirun, "-np", "2", "--oversubscribe", a.kimi, "inspect", "--model", model])
        check(rc == 0 and out.count("ranks:        2 (tensor parallel)") == 1 and "rank 1 " in out,
              "inspect under mpirun -np 2 prints once, with each rank's weight bytes")
        base = [a.kimi, "generate", "--model", model, "--tokens", "1,2,3", "-n", "2"]
        rc, _, err = run(base + ["--tensor-parallel-size", "2"])
        check(rc == 1 and "--tensor-parallel-size 2" in err and "mpirun -np 2" in err, "--tensor-parallel-size 2 alone: " + err.strip()[-160:])
        rc, _, err = run([a.mpirun, "-np", "2", "--oversubscribe"] + base + ["--tensor-parallel-size", "3"])
        check(rc != 0 and "differs from the 2 processes" in err, "mpirun -np 2 with --tensor-parallel-size 3: " + err.strip()[-160:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % len(failures) if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
