#!/usr/bin/env python3
"""Structured output (grammar-constrained decoding) vs free decoding: the per-token cost at batch 1.

One fresh `kimi-cpp serve` (--max-num-seqs 1) gets streamed /v1/completions requests of a fixed
--prompt, --max-tokens each, temperature 1.0, in four modes:

1. `free`: no constraint, ignore_eos;
2. `schema`: response_format json_schema with --schema (default bench/schemas/order20.json, a nested
   20-property schema); temperature alone, so the engine first tries the unmasked draw and computes
   the full token mask only when the grammar refuses it;
3. `schema-top-p`: as 2 plus top_p 0.95, which takes the full mask path every step;
4. `schema-logprobs`: as 2 plus logprobs 1, also the full mask path.

Per request: TTFT, the arrival time of each token (each SSE chunk with non-empty choices),
TPOT = (last - first) / (n - 1), n, finish_reason, and for the schema modes whether the text parses
as JSON. Before timing, one short warm-up request of each mode (not counted): the first constrained
request also builds the engine's vocabulary trie, so its TTFT is reported as the first-request
setup. Then --repeats rounds, each running every mode once in a rotated order (free first, then
schema first, ...) so machine drift hits all modes; a round's requests share the seed --seed +
round. Per mode: mean and median TPOT, tokens, overhead of the mean TPOT vs `free`, JSON validity;
from /metrics the mean grammar compile time (kimi:grammar_compile_seconds _sum / _count, as a
difference over the timed requests). Markdown on stdout, progress on stderr, all raw numbers +
config + machine with --json FILE. Never fails on speed; the server is stopped on any exit.

    python3 bench/structured_output.py --kimi build/bin/kimi-cpp --model models/bench [--repeats 3] \\
        [--max-tokens 320] [--schema bench/schemas/order20.json] [--prompt 'Order record:'] \\
        [--threads 2] [--json bench/results/structured-output.json]

`make bench` runs it with the defaults into bench/results/structured-output.json and .md (2–5
minutes on models/bench with 2 cores: 12 timed requests of up to 320 tokens at 35–85 ms/token;
320 leaves room for a whole order20.json reply, so JSON validity is meaningful).
"""
import argparse
import collections
import http.client
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import (Server, check_inputs, exit_on_signals, fmt, machine_info, machine_line,  # noqa: E402
                        model_line, order_for, quote, serve_cmd, server_version, sse_events, stop_all, wait_idle)
import serve_util  # noqa: E402

PROG = "structured_output"
MODES = ("free", "schema", "schema-top-p", "schema-logprobs")
COMPILE_SUM, COMPILE_COUNT = "kimi:grammar_compile_seconds_sum", "kimi:grammar_compile_seconds_count"



def log(msg):
    serve_util.log(PROG, msg)


# ------------------------------------------------------------------------------------------------
# Server and HTTP
# ------------------------------------------------------------------------------------------------

def start_server(args):
    """The fresh server of the run, batch 1 (--max-num-seqs 1)."""
    return Server(serve_cmd(args, ["--max-num-seqs", "1"]), PROG, args.startup_timeout)


def stream_completion(port, body):
    """Streams one completion: text, finish_reason, usage, TTFT and the arrival time of every token chunk."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=6 * 3600)
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return {"error": f"HTTP {r.status}: {r.read()[:500]!r}"}
        arrivals, parts, usage, finish, done, error = [], [], None, None, False, None
        for payload in sse_events(r):
            if payload == "[DONE]":
                done = True
                break
            ev = json.loads(payload)
            if "error" in ev:
                error = f"stream error: {ev['error']}"
                break
            if ev.get("usage"):
                usage = ev["usage"]
            choices = ev.get("choices") or []
            if choices:
                arrivals.append(time.perf_counter() - t0)
            for ch in choices:
                parts.append(ch.get("text") or "")
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        e2e = time.perf_counter() - t0
        if error is None and not done:
            error = "stream ended without [DONE]"
        return {"text": "".join(parts), "finish_reason": finish, "usage": usage, "arrivals_s": arrivals,
                "e2e_s": e2e, "error": error}
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------
# The modes
# ------------------------------------------------------------------------------------------------

def body_for(args, mode, schema, seed, max_tokens):
    body = {"model": args.served_name, "prompt": args.prompt, "max_tokens": max_tokens, "temperature": 1.0,
            "seed": seed, "stream": True, "stream_options": {"include_usage": True}}
    if mode == "free":
        body["ignore_eos"] = True
        return body
    body["response_format"] = {"type": "json_schema", "json_schema": {"name": "order", "schema": schema}}
    if mode == "schema-top-p":
        body["top_p"] = 0.95
    elif mode == "schema-logprobs":
        body["logprobs"] = 1
    return body


def json_valid(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def run_one(srv, args, mode, schema, seed, max_tokens, repeat, tag):
    r = stream_completion(srv.port, body_for(args, mode, schema, seed, max_tokens))
    if r.get("error"):
        log(f"{tag} {mode}: FAILED: {r['error']}")
        return {"mode": mode, "repeat": repeat, "seed": seed, "error": r["error"]}
    arr = r["arrivals_s"]
    n = len(arr)
    gaps = [(b - a) * 1e3 for a, b in zip(arr, arr[1:])]
    row = {"mode": mode, "repeat": repeat, "seed": seed, "error": None, "tokens": n,
           "usage_completion_tokens": (r["usage"] or {}).get("completion_tokens"),
           "prompt_tokens": (r["usage"] or {}).get("prompt_tokens"),
           "ttft_ms": arr[0] * 1e3 if arr else None,
           "tpot_ms": (arr[-1] - arr[0]) * 1e3 / (n - 1) if n > 1 else None,
           "e2e_ms": r["e2e_s"] * 1e3, "finish_reason": r["finish_reason"],
           "json_valid": None if mode == "free" else json_valid(r["text"]),
           "text": r["text"], "itls_ms": gaps}
    log(f"{tag} {mode}: {n} tokens ({row['finish_reason']}), TTFT {fmt(row['ttft_ms'])} ms, "
        f"TPOT {fmt(row['tpot_ms'], '{:.2f}')} ms" + ("" if mode == "free" else f", JSON {'ok' if row['json_valid'] else 'INVALID'}"))
    return row


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def compile_ms(after, before):
    """Mean grammar compile time (ms) and the count, as a difference of the /metrics histogram."""
    if COMPILE_COUNT not in after:
        return None, None
    n = after[COMPILE_COUNT] - before.get(COMPILE_COUNT, 0.0)
    s = after.get(COMPILE_SUM, 0.0) - before.get(COMPILE_SUM, 0.0)
    return (s / n * 1e3 if n else None), n


def summarize(rows):
    by = {m: [r for r in rows if r["mode"] == m and not r.get("error")] for m in MODES}
    summary = {}
    for m in MODES:
        rs = by[m]
        tpots = [r["tpot_ms"] for r in rs if r["tpot_ms"] is not None]
        ttfts = [r["ttft_ms"] for r in rs if r["ttft_ms"] is not None]
        gaps = [g for r in rs for g in r["itls_ms"]]
        finishes = collections.Counter(r["finish_reason"] for r in rs)
        summary[m] = {
            "requests": len(rs), "failed": sum(1 for r in rows if r["mode"] == m and r.get("error")),
            "tokens": sum(r["tokens"] for r in rs),
            "mean_tpot_ms": statistics.mean(tpots) if tpots else None,
            "median_tpot_ms": statistics.median(tpots) if tpots else None,
            "min_tpot_ms": min(tpots) if tpots else None, "max_tpot_ms": max(tpots) if tpots else None,
            "median_itl_ms": statistics.median(gaps) if gaps else None,
            "mean_ttft_ms": statistics.mean(ttfts) if ttfts else None,
            "finish_reasons": dict(finishes),
            "json_valid": None if m == "free" else sum(1 for r in rs if r["json_valid"]),
        }
    free = summary["free"]["mean_tpot_ms"]
    for m in MODES:
        t = summary[m]["mean_tpot_ms"]
        summary[m]["overhead_vs_free"] = (t / free - 1.0) if (t is not None and free) else None
    return summary


def report(args, summary, warm, compile_timed, compile_warm, schema_props):
    n = args.repeats
    lines = [f"Batch 1 (--max-num-seqs 1), /v1/completions streamed, prompt {args.prompt!r}, up to {args.max_tokens} "
             f"tokens, temperature 1.0; schema: {args.schema} ({schema_props} properties, nested). {n} round(s), the "
             "modes rotated each round, seed --seed + round. TPOT = (last token - first token) / (tokens - 1) per "
             "request; mean and median over the requests [min, max]; overhead = mean TPOT / free's mean TPOT - 1.", "",
             "| mode | requests | tokens | mean TPOT ms | median TPOT ms | overhead vs free | JSON valid | mean TTFT ms | finish |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in MODES:
        s = summary[m]
        rng = ""
        if s["min_tpot_ms"] is not None and s["requests"] > 1:
            rng = f" [{s['min_tpot_ms']:.2f}, {s['max_tpot_ms']:.2f}]"
        ov = "–" if m == "free" or s["overhead_vs_free"] is None else f"{100 * s['overhead_vs_free']:+.1f} %"
        jv = "–" if m == "free" else f"{s['json_valid']}/{s['requests']}"
        fin = ", ".join(f"{k} {v}" for k, v in sorted(s["finish_reasons"].items(), key=lambda kv: str(kv[0])))
        req = str(s["requests"]) + (f" (+{s['failed']} failed)" if s["failed"] else "")
        lines.append(f"| {m} | {req} | {s['tokens']} | {fmt(s['mean_tpot_ms'], '{:.2f}')}{rng} | "
                     f"{fmt(s['median_tpot_ms'], '{:.2f}')} | {ov} | {jv} | {fmt(s['mean_ttft_ms'])} | {fin} |")
    lines.append("")
    c_ms, c_n = compile_timed
    lines.append(f"Grammar compile (kimi:grammar_compile_seconds over the timed requests): "
                 + (f"mean {c_ms:.2f} ms over {c_n:.0f} compiles" if c_ms is not None else "no samples")
                 + (f"; the warm-up's: mean {compile_warm[0]:.2f} ms over {compile_warm[1]:.0f}" if compile_warm[0] is not None else "")
                 + ".")
    lines.append("")
    w = {r["mode"]: r for r in warm}
    first_c = next((r for r in warm if r["mode"] != "free" and not r.get("error")), None)
    if w.get("free") and not w["free"].get("error") and first_c \
            and first_c["ttft_ms"] is not None and w["free"]["ttft_ms"] is not None:
        lines.append(f"First-request setup (warm-up, {args.warmup_tokens} tokens each, not counted above): TTFT of the "
                     f"first constrained request ({first_c['mode']}, builds the vocabulary trie) {fmt(first_c['ttft_ms'])} ms "
                     f"vs {fmt(w['free']['ttft_ms'])} ms free, {fmt(first_c['ttft_ms'] - w['free']['ttft_ms'])} ms more; "
                     "later warm-ups: " + ", ".join(f"{r['mode']} {fmt(r['ttft_ms'])} ms" for r in warm
                                                    if r is not first_c and r["mode"] != "free" and not r.get("error")) + ".")
        lines.append("")
    return lines


def checks(rows, warm):
    """Sanity warnings (never failures)."""
    warn = []
    for r in warm + rows:
        what = f"{r['mode']}, " + ("warm-up" if r.get("repeat") is None else f"round {r['repeat'] + 1}")
        if r.get("error"):
            warn.append(f"{what}: request failed: {r['error']}")
            continue
        if r["tokens"] < 2:
            warn.append(f"{what}: {r['tokens']} token chunk(s), no TPOT")
        if r["usage_completion_tokens"] is not None and r["usage_completion_tokens"] != r["tokens"]:
            warn.append(f"{what}: {r['tokens']} token chunks but usage.completion_tokens {r['usage_completion_tokens']}")
        if r.get("repeat") is not None and r["mode"] != "free" and not r["json_valid"]:
            warn.append(f"{what}: the text does not parse as JSON (finish_reason {r['finish_reason']}"
                        + (", cut by max_tokens" if r["finish_reason"] == "length" else "") + f"): {r['text'][:120]!r}")
    return warn


# ------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    serve_util.add_server_args(ap, threads_default=2)
    ap.add_argument("--schema", default="bench/schemas/order20.json", help="the JSON schema of the schema modes")
    ap.add_argument("--prompt", default="Order record:", help="the prompt of every request")
    ap.add_argument("--max-tokens", type=int, default=320, help="max_tokens of each timed request")
    ap.add_argument("--warmup-tokens", type=int, default=16, help="max_tokens of each mode's warm-up request")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; each runs every mode once, in a rotated order")
    ap.add_argument("--seed", type=int, default=0, help="round r's requests use seed + r")
    ap.add_argument("--json", default="", help="write all raw numbers, the config and the machine here")
    args = ap.parse_args()

    for name in ("repeats", "max_tokens", "warmup_tokens"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    check_inputs(args.kimi, args.model, PROG)
    try:
        with open(args.schema) as f:
            schema = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"structured_output: --schema {args.schema}: {e}")
    args.served_name = args.served_name or os.path.basename(os.path.normpath(args.model)) or "model"

    def count_props(s):
        if isinstance(s, dict):
            return len(s.get("properties") or {}) + sum(count_props(v) for v in s.values())
        if isinstance(s, list):
            return sum(count_props(v) for v in s)
        return 0

    # SIGTERM / SIGHUP end like Ctrl-C: the finally below stops the server.
    exit_on_signals(PROG)

    t_start = time.time()
    rows, warm = [], []
    version, server_cmd = None, None
    try:
        with tempfile.TemporaryDirectory(prefix="kimi-structured-output-") as tmp:
            machine = machine_info(args.kimi, tmp, PROG)
        log("starting server")
        srv = start_server(args)
        server_cmd = srv.cmd
        version = server_version(srv.port)
        m0 = wait_idle(srv.port, PROG)
        for mode in MODES:
            warm.append(run_one(srv, args, mode, schema, args.seed, args.warmup_tokens, None, "warm-up"))
        m1 = wait_idle(srv.port, PROG)
        for rep in range(args.repeats):
            for mode in order_for(MODES, rep):
                rows.append(run_one(srv, args, mode, schema, args.seed + rep, args.max_tokens, rep,
                                    f"round {rep + 1}/{args.repeats}"))
                wait_idle(srv.port, PROG)
        m2 = wait_idle(srv.port, PROG)
        srv.stop()
    except KeyboardInterrupt:
        stop_all()
        raise SystemExit("structured_output: interrupted")
    finally:
        stop_all()
    wall = time.time() - t_start
    try:
        machine["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass

    summary = summarize(rows)
    compile_timed, compile_warm = compile_ms(m2, m1), compile_ms(m1, m0)
    out = ["# Structured output vs free decoding, batch 1 (kimi.cpp serve)", "", machine_line(machine),
           model_line(args.model, version, t_start, wall)]
    out += ["", "```", quote([sys.executable.split("/")[-1]] + sys.argv), quote(server_cmd), "```", ""]
    out += report(args, summary, warm, compile_timed, compile_warm, count_props(schema))
    warnings = checks(rows, warm)
    for w in warnings:
        log("warning: " + w)
    if warnings:
        out += ["Warnings:", ""] + [f"- {w}" for w in warnings] + [""]
    print("\n".join(out).rstrip())

    if args.json:
        cfg = {k: v for k, v in vars(args).items() if k != "json"}
        with open(args.json, "w") as f:
            json.dump({"benchmark": "structured_output", "config": cfg, "argv": sys.argv, "machine": machine,
                       "server_cmd": server_cmd, "server_version": version, "wall_s": wall, "started": t_start,
                       "warmup": warm, "requests": rows, "summary": summary,
                       "grammar_compile": {"timed_mean_ms": compile_timed[0], "timed_count": compile_timed[1],
                                           "warmup_mean_ms": compile_warm[0], "warmup_count": compile_warm[1]},
                       "warnings": warnings}, f, indent=2)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
