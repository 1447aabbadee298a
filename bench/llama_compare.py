#!/usr/bin/env python3
"""kimi.cpp against llama.cpp on the same weights, interleaved on one box.

For each --pair NAME=MODEL_DIR,FILE.gguf (the GGUF converted from MODEL_DIR by llama.cpp's own
converter: tools/llama_convert/convert.sh), every round runs `kimi-cpp bench model` (prefill
--prompt-len tokens; batch-1 decode, and the batches of --batches) and then `llama-bench`
(pp and tg, the same threads), so both see the same drift of the machine. Prints a markdown
table of every round and the ratios, and writes --json. Never fails on speed.

    python3 bench/llama_compare.py --kimi build/bin/kimi-cpp \\
        --llama-bench /path/to/llama.cpp/build/bin/llama-bench \\
        --pair k3-bench=models/k3-bench,k3-bench.gguf --rounds 2
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run_kimi(args, model, js):
    cmd = [args.kimi, "bench", "model", "--model", model, "--prompt-lens", str(args.prompt_len),
           "--batches", args.batches, "--contexts", "0", "--reps", str(args.reps),
           "--decode-steps", str(args.decode_steps), "--threads", str(args.threads), "--quiet", "--json", js]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    j = json.load(open(js))
    out = {"pp": j["prefill"][0]["tokens_per_s"]["median"], "pp_pct_of_peak": j["prefill"][0]["pct_of_peak"],
           "read_bandwidth_gbs": j["read_bandwidth_gbs"], "read_bandwidth_spread_gbs": j["read_bandwidth_spread_gbs"]}
    for row in j["decode"]:
        b = row["batch"]
        out[f"tg_b{b}"] = row["tokens_per_s"]["median"]
        out[f"tg_b{b}_pct_of_roofline"] = row["pct_of_roofline"]
    return out


def run_llama(args, gguf):
    cmd = [args.llama_bench, "-m", gguf, "-t", str(args.threads), "-p", str(args.prompt_len),
           "-n", str(args.decode_steps), "-r", str(args.reps), "-o", "json"]
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows = json.loads(p.stdout)
    out = {}
    for r in rows:
        key = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else "tg_b1"
        out[key] = r["avg_ts"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--pair", action="append", required=True, help="NAME=MODEL_DIR,FILE.gguf")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--decode-steps", type=int, default=32)
    ap.add_argument("--batches", default="1", help="kimi.cpp decode batches (llama-bench measures batch 1)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if "1" not in args.batches.split(","):
        sys.exit("--batches must include 1 (the row compared with llama-bench)")
    pairs = []
    for p in args.pair:
        name, _, rest = p.partition("=")
        model, _, gguf = rest.partition(",")
        if not (name and model and gguf):
            sys.exit(f"--pair {p}: expected NAME=MODEL_DIR,FILE.gguf")
        pairs.append((name, model, gguf))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
    results = {name: [] for name, _, _ in pairs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, model, gguf in pairs:
                print(f"round {r + 1}/{args.rounds}: {name}", file=sys.stderr, flush=True)
                k = run_kimi(args, model, os.path.join(tmp, "k.json"))
                l = run_llama(args, gguf)
                results[name].append({"kimi": k, "llama": l})
    print(f"CPU: {cpu}; {args.threads} threads; prefill {args.prompt_len} tokens, decode {args.decode_steps} "
          f"steps; {args.rounds} interleaved rounds\n")
    extra = [b for b in args.batches.split(",") if b != "1"]
    head = "| checkpoint | round | kimi pp | llama pp | pp ratio | kimi pp % of peak | kimi tg b1 | llama tg b1 | " \
           "tg ratio | kimi tg b1 % of roofline | probe GB/s (median [min, max]) |"
    for b in extra:
        head += f" kimi tg b{b} (% of roofline) |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for name, rounds in results.items():
        for i, r in enumerate(rounds):
            k, l = r["kimi"], r["llama"]
            r["pp_ratio"] = k["pp"] / l["pp"] if l.get("pp") else None
            r["tg_ratio"] = k["tg_b1"] / l["tg_b1"] if l.get("tg_b1") else None
            sp = k["read_bandwidth_spread_gbs"]
            line = (f"| {name} | {i + 1} | {k['pp']:.1f} | {l.get('pp', 0):.1f} | {r['pp_ratio'] or 0:.2f}x | "
                    f"{k['pp_pct_of_peak']:.1f} % | {k['tg_b1']:.2f} | {l.get('tg_b1', 0):.2f} | "
                    f"{r['tg_ratio'] or 0:.2f}x | {k['tg_b1_pct_of_roofline']:.1f} % | "
                    f"{sp['median']:.1f} [{sp['min']:.1f}, {sp['max']:.1f}] |")
            for b in extra:
                line += f" {k[f'tg_b{b}']:.1f} ({k[f'tg_b{b}_pct_of_roofline']:.1f} %) |"
            print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "llama_compare", "cpu": cpu, "threads": args.threads,
                       "prompt_len": args.prompt_len, "decode_steps": args.decode_steps, "results": results}, f,
                      indent=2)


if __name__ == "__main__":
    main()
