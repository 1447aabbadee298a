#!/usr/bin/env python3
"""The CPU-speed table (issue 17's rows) for kimi.cpp: prefill 512 tokens, decode batch 1 and
batch 16 at context 0, with bf16 and with f32 activations, on one checkpoint.

Runs `kimi-cpp bench model` once per activation dtype under `perf stat` (page faults and system
time of the whole process, load included) and joins its JSON rows (tokens/s median [min, max],
% of the measured peak or roofline, page faults per steady-state step, share of system time
during the rows) into one Markdown table on stdout, plus --json FILE. Never fails on speed.

    python3 bench/cpu_table.py --kimi build/bin/kimi-cpp --model models/bench [--reps 3] [--json out.json]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run_dtype(args, dtype, tmp):
    out_json = os.path.join(tmp, f"model-{dtype}.json")
    cmd = [args.kimi, "bench", "model", "--model", args.model, "--prompt-lens", "512", "--batches", "1,16",
           "--contexts", "0", "--reps", str(args.reps), "--decode-steps", str(args.decode_steps),
           "--activation-dtype", dtype, "--json", out_json, "--quiet"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    perf = shutil.which("perf")
    stat = os.path.join(tmp, f"perf-{dtype}.txt")
    full = ([perf, "stat", "-e", "page-faults,task-clock", "-o", stat] + cmd) if perf else cmd
    print(f"cpu_table: {' '.join(cmd)}", file=sys.stderr, flush=True)
    res = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        raise SystemExit(f"cpu_table: bench model ({dtype}) failed with exit code {res.returncode}")
    with open(out_json) as f:
        rows = json.load(f)
    totals = {"perf": bool(perf)}
    if perf and os.path.exists(stat):
        text = open(stat).read()
        m = re.search(r"([\d,]+)\s+page-faults", text)
        totals["page_faults"] = int(m.group(1).replace(",", "")) if m else None
        for key in ("elapsed", "user", "sys"):
            m = re.search(r"([\d.]+) seconds " + key, text)
            totals[key + "_s"] = float(m.group(1)) if m else None
    rows["process"] = totals
    return rows


def cell(row, kind):
    s = row["tokens_per_s"]
    pct = row.get("pct_of_peak") if kind == "prefill" else row.get("pct_of_roofline")
    what = "of peak" if kind == "prefill" else "of roofline"
    faults = row.get("page_faults_per_prefill") if kind == "prefill" else row.get("page_faults_per_step")
    return (f"{s['median']:.1f} [{s['min']:.1f}, {s['max']:.1f}] ({pct:.1f} % {what}; "
            f"{faults:.0f} faults/{'prefill' if kind == 'prefill' else 'step'}, sys {row.get('sys_pct', 0):.1f} %)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kimi", default="build/bin/kimi-cpp")
    ap.add_argument("--model", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kimi-cpu-table-") as tmp:
        runs = {d: run_dtype(args, d, tmp) for d in ("bf16", "f32")}
    table = []
    for label, kind, pick in (("prefill 512 tokens, tok/s", "prefill", lambda r: r["prefill"][0]),
                              ("decode batch 1, tok/s", "decode", lambda r: r["decode"][0]),
                              ("decode batch 16, tok/s", "decode", lambda r: r["decode"][1])):
        table.append((label, cell(pick(runs["bf16"]), kind), cell(pick(runs["f32"]), kind)))
    b = runs["bf16"]
    print(f"machine: {b.get('cpu_flags', '')}; {b['threads']} threads; weights: {b.get('weight_memory', '?')}")
    for d, r in runs.items():
        print(f"limits ({d} run): read bandwidth {r['read_bandwidth_gbs']:.1f} GB/s, {r['peak_isa']} peak {r['peak_gflops']:.1f} GFLOP/s")
    print()
    print("| row | kimi.cpp bf16 | kimi.cpp f32 |")
    print("| --- | --- | --- |")
    for label, a, c in table:
        print(f"| {label} | {a} | {c} |")
    print()
    for d, r in runs.items():
        p = r["process"]
        if p.get("perf"):
            print(f"perf stat ({d}, whole process incl. load): {p.get('page_faults')} page faults, "
                  f"sys {p.get('sys_s')} s of user {p.get('user_s')} s, elapsed {p.get('elapsed_s')} s")
        else:
            print(f"perf stat ({d}): perf not installed; the per-row counters above are bench model's own")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "cpu_table", "model": args.model, "runs": runs,
                       "table": [{"row": l, "bf16": a, "f32": c} for l, a, c in table]}, f, indent=2)


if __name__ == "__main__":
    main()
