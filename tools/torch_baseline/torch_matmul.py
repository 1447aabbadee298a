#!/usr/bin/python3
"""PyTorch bf16 baseline of `kimi-cpp bench matmul --compare-torch` (speed reference).

The product a user would otherwise reach for on a CPU: `torch.nn.functional.linear(x, w)`,
i.e. x [T, I] bf16 @ w [O, I].T bf16 -> [T, O] bf16, with torch's own threads set to the
engine's.  Measured the way bench matmul measures its own rows: per OUTxIN shape, enough copies
of the weights to cycle through at least --working-set-mb (so every call reads its weights from
DRAM, not from a cache), capped at --max-weights-mb so the baseline's memory stays bounded; per
token count, one untimed warm-up call (on the last copy) and then --reps passes over all the
copies, each call timed alone.  gflops = 2*O*I*T / median seconds / 1e9.

Uses only the standard library and torch (Debian python3-torch).

CLI (called by `kimi-cpp bench matmul --compare-torch`):
  torch_matmul.py --shapes 3072x7168,7168x3584 --tokens 1,16,512 --reps 5 --working-set-mb 1024 \
                  --threads 2 --json OUT.json [--max-weights-mb 3584] [--seed 0] [--quiet]
Output JSON: {"benchmark", "torch": {version, mkldnn, onednn_version, onednn_isa, onednn_impl,
cpu_capability}, "threads", "rows": [{shape, out, in, tokens, copies, ms: {min, median, max},
gflops}]}.  Progress goes to stderr unless --quiet; bad arguments exit 2 with one line.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # keep the source tree clean


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def log(quiet, msg):
    if not quiet:
        print(f"torch_matmul: {msg}", file=sys.stderr, flush=True)


def parse_shape(s):
    m = re.fullmatch(r"\s*(\d+)x(\d+)\s*", s)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise UsageError(f"--shapes: '{s}' is not OUTxIN (e.g. 12288x7168)")
    return s.strip(), int(m.group(1)), int(m.group(2))


def parse_args(argv):
    ap = _Parser(prog="torch_matmul.py", description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", required=True, help="comma-separated OUTxIN")
    ap.add_argument("--tokens", required=True, help="comma-separated token counts T")
    ap.add_argument("--reps", type=int, default=5, help="passes over all the weight copies")
    ap.add_argument("--working-set-mb", type=int, default=1024)
    ap.add_argument("--max-weights-mb", type=int, default=3584, help="cap on the weight copies' memory")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", required=True, help="output file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    a.shapes = [parse_shape(s) for s in a.shapes.split(",") if s.strip()]
    try:
        a.tokens = [int(t) for t in a.tokens.split(",") if t.strip()]
    except ValueError:
        raise UsageError(f"--tokens: expected comma-separated integers, got '{a.tokens}'")
    if not a.shapes or not a.tokens or min(a.tokens) < 1:
        raise UsageError("--shapes and --tokens need at least one entry, tokens >= 1")
    if a.reps < 1 or a.threads < 1 or a.working_set_mb < 1 or a.max_weights_mb < 1:
        raise UsageError("--reps, --threads, --working-set-mb and --max-weights-mb must be >= 1")
    if not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        raise UsageError(f"--json: directory of {a.json} does not exist")
    return a


def onednn_info():
    """oneDNN's version, ISA and the implementation of one small bf16 product, from its verbose
    lines (printed to fd 1 on the first primitive, so caught on a pipe); None where unknown."""
    info = {"onednn_version": None, "onednn_isa": None, "onednn_impl": None}
    if not torch.backends.mkldnn.is_available():
        return info
    sys.stdout.flush()
    rd, wr = os.pipe()
    saved = os.dup(1)
    os.dup2(wr, 1)
    try:
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            F.linear(torch.ones(4, 64, dtype=torch.bfloat16), torch.ones(32, 64, dtype=torch.bfloat16))
    except (RuntimeError, AttributeError):
        pass
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(wr)
    with os.fdopen(rd, "r", errors="replace") as fh:   # a few short lines: well under the pipe's buffer
        text = fh.read()
    for line in text.splitlines():
        f = line.split(",")
        if line.startswith("onednn_verbose,info,oneDNN"):
            info["onednn_version"] = f[2].split(" ")[1] if " " in f[2] else f[2]
        elif line.startswith("onednn_verbose,info,cpu,isa:"):
            info["onednn_isa"] = line.split("isa:", 1)[1]
        elif line.startswith("onednn_verbose,exec,cpu,matmul,") and len(f) > 4:
            info["onednn_impl"] = f[4]
    return info


def torch_info():
    cap = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    return {"version": torch.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
            **onednn_info(), "cpu_capability": cap.group(1) if cap else None}


def summary(vals):
    return {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}


def bench_shape(name, out, inp, a, gen):
    w_bytes = out * inp * 2
    copies = max(1, (a.working_set_mb << 20) // w_bytes)
    cap = max(1, (a.max_weights_mb << 20) // w_bytes)
    capped = copies > cap
    copies = min(copies, cap)
    w0 = torch.empty(out, inp, dtype=torch.bfloat16).uniform_(-0.5, 0.5, generator=gen)
    ws = [w0] + [w0.clone() for _ in range(copies - 1)]          # distinct memory, same values
    log(a.quiet, f"{name}: {copies} weight copies ({copies * w_bytes / 2**20:.0f} MiB"
                 f"{', capped' if capped else ''})")
    rows = []
    for t in a.tokens:
        x = torch.empty(t, inp, dtype=torch.bfloat16).uniform_(-0.5, 0.5, generator=gen)
        F.linear(x, ws[-1])                                      # warm-up
        ms = []
        for r in range(a.reps * copies):
            w = ws[r % copies]
            t0 = time.perf_counter()
            F.linear(x, w)
            ms.append(1e3 * (time.perf_counter() - t0))
        s = summary(ms)
        gflops = 2.0 * out * inp * t / 1e6 / s["median"]
        rows.append({"shape": name, "out": out, "in": inp, "tokens": t, "copies": copies, "ms": s,
                     "gflops": gflops})
        log(a.quiet, f"{name} T={t}: {s['median']:.3f} ms, {gflops:.1f} GFLOP/s (median of {len(ms)})")
    del ws, w0
    return rows


def main(argv=None):
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
        torch.set_num_threads(a.threads)
        gen = torch.Generator().manual_seed(a.seed)
        with torch.inference_mode():
            info = torch_info()
            log(a.quiet, f"torch {info['version']}, oneDNN {info['onednn_version']} ({info['onednn_isa']}), "
                         f"{a.threads} threads")
            rows = []
            for name, out, inp in a.shapes:
                rows += bench_shape(name, out, inp, a, gen)
        res = {"benchmark": "torch_matmul_bf16", "torch": info, "threads": a.threads, "reps": a.reps,
               "working_set_mb": a.working_set_mb, "rows": rows}
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)
            fh.write("\n")
    except UsageError as e:
        print(f"torch_matmul: {e}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as e:
        print(f"torch_matmul: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
