#!/usr/bin/env python3
"""BF16 against MXFP4 experts on the same checkpoint: prefill, batch-1 decode (% of the roofline),
batch-16 decode, the bytes a batch-1 step reads and the GB/s that makes, for pairs of model directories, in one
interleaved run (bf16, MXFP4, bf16, MXFP4, ... per round) so the machine's drifting bandwidth
hits both alike. Each run is `kimi-cpp bench model` with bf16 activations at context 0; the
table shows each round's figure and the MXFP4 / bf16 ratio of the medians. Never fails on speed.

    python3 bench/mxfp4_table.py --kimi build/bin/kimi-cpp \
        --pair bench=models/bench,models/bench-mxfp4 --pair k3-bench=models/k3-bench,models/k3-bench-mxfp4 \
        [--rounds 2] [--prompt-len 512] [--reps 2] [--json out.json]

Make the MXFP4 directories with `kimi-cpp make-model --preset P --mxfp4-experts` (or `quantize`).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def bench_once(args, model, tmp, tag):
    out = os.path.join(tmp, f"{tag}.json")
    cmd = [args.kimi, "bench", "model", "--model", model, "--prompt-lens", str(args.prompt_len), "--batches", "1,16",
           "--contexts", "0", "--reps", str(args.reps), "--decode-steps", str(args.decode_steps),
           "--activation-dtype", "bf16", "--json", out, "--quiet"]
    print(f"mxfp4_table: {' '.join(cmd)}", file=sys.stderr, flush=True)
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        raise SystemExit(f"mxfp4_table: bench model on {model} failed with exit code {res.returncode}")
    with open(out) as f:
        j = json.load(f)
    row = {"read_bandwidth_gbs": j["read_bandwidth_gbs"]}
    for p in j["prefill"]:
        row["prefill_tok_s"] = p["tokens_per_s"]["median"]
    for d in j["decode"]:
        key = f"b{d['batch']}"
        row[key + "_tok_s"] = d["tokens_per_s"]["median"]
        if d["batch"] == 1:
            row["b1_pct_roofline"] = d["pct_of_roofline"]
            row["b1_mib_per_step"] = d["bytes_per_step"] / 2**20
            row["b1_read_gbs"] = d["bytes_per_step"] * d["tokens_per_s"]["median"] / 1e9   # what the step reads per second
    return row


def machine(kimi):
    res = subprocess.run([kimi, "bench", "machine"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = res.stdout.strip().splitlines()[0] if res.returncode == 0 and res.stdout.strip() else "unknown CPU"
    return line.removeprefix("machine: ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--pair", action="append", required=True, help="NAME=BF16_DIR,MXFP4_DIR")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--decode-steps", type=int, default=8)
    ap.add_argument("--json")
    args = ap.parse_args()
    pairs = []
    for p in args.pair:
        name, _, dirs = p.partition("=")
        bf16, _, mx = dirs.partition(",")
        if not (name and bf16 and mx):
            raise SystemExit(f"mxfp4_table: --pair wants NAME=BF16_DIR,MXFP4_DIR, got '{p}'")
        pairs.append((name, {"bf16": bf16, "mxfp4": mx}))
    runs = {(n, f): [] for n, _ in pairs for f in ("bf16", "mxfp4")}
    bw = []   # the roofline's read bandwidth, as each run measured it, in run order
    with tempfile.TemporaryDirectory(prefix="kimi-mxfp4-table-") as tmp:
        for r in range(args.rounds):
            for name, dirs in pairs:
                for form in ("bf16", "mxfp4"):
                    runs[(name, form)].append(bench_once(args, dirs[form], tmp, f"{name}-{form}-{r}"))
                    bw.append(runs[(name, form)][-1]["read_bandwidth_gbs"])
    cols = [("prefill_tok_s", f"pp{args.prompt_len} tok/s"), ("b1_tok_s", "decode b1 tok/s"),
            ("b1_read_gbs", "b1 GB/s read"), ("b1_pct_roofline", "b1 % of roofline"), ("b16_tok_s", "decode b16 tok/s"), ("b1_mib_per_step", "MiB read per b1 step")]
    print(f"machine: {machine(args.kimi)}; {args.rounds} interleaved rounds, bf16 activations, context 0\n")
    print("| checkpoint | experts | " + " | ".join(c[1] for c in cols) + " |")
    print("| --- | --- |" + " --- |" * len(cols))
    summary = {}
    for name, _ in pairs:
        for form in ("bf16", "mxfp4"):
            rows = runs[(name, form)]
            cells = [" / ".join(f"{row[k]:.1f}" for row in rows) for k, _ in cols]
            print(f"| {name} | {form} | " + " | ".join(cells) + " |")
        med = {f: {k: statistics.median(row[k] for row in runs[(name, f)]) for k, _ in cols} for f in ("bf16", "mxfp4")}
        ratio = {k: med["mxfp4"][k] / med["bf16"][k] for k, _ in cols if med["bf16"][k]}
        print(f"| {name} | MXFP4 / bf16 | " + " | ".join(f"{ratio.get(k, 0):.2f}x" for k, _ in cols) + " |")
        summary[name] = {"median": med, "ratio": ratio, "runs": {f: runs[(name, f)] for f in ("bf16", "mxfp4")}}
    print(f"\nread bandwidth measured by the runs (the roofline's): {' / '.join(f'{b:.1f}' for b in bw)} GB/s, in run order")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(args.kimi), "rounds": args.rounds, "prompt_len": args.prompt_len, "pairs": summary}, f,
                      indent=2)


if __name__ == "__main__":
    main()
