#!/usr/bin/python3
"""`kimi-cpp generate` over MPI: the same greedy tokens (f32 and bf16) from one process and from
`mpirun -np 2` and `-np 3` (heads split unevenly), with tensor and with expert parallelism; and
the clear errors: --tensor-parallel-size without a matching MPI job.

    /usr/bin/python3 tests/dist/mpi_cli_test.py --kimi build/bin/kimi-cpp --mpirun /usr/bin/mpiexec
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


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
        model = os.path.join(tmp, "tiny")
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
